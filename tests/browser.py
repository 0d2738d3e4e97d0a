"""Open a report page in headless Chromium: it must render (a screenshot
that is not blank) with no console error. Used by the report tests."""
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render(page: Path, workdir: Path) -> Path:
    """Screenshot ``page`` into ``workdir``; assert it rendered cleanly."""
    shot = workdir / f"{page.stem}.png"
    run = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={workdir / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.stat().st_size > 20_000, "the screenshot is (nearly) blank"
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    return shot
