"""Start-up: commands load only what they use, and `grader grade` starts its
fork-server before its own heavy imports (issue 19). No timing here: that
is bench/startup.py's job; these check what is imported and in what order."""
import json
import subprocess
import sys
import textwrap

import pytest

from grader.course import REPO_ROOT
from grader.sandbox import prestart

# Runs the grader's entry point in a fresh interpreter, then prints which
# heavy modules ended up imported (at exit, whatever the command did).
_WRAPPER = textwrap.dedent("""
    import atexit, json, sys
    def report():
        heavy = ("torch", "matplotlib", "numpy")
        sys.__stderr__.write("MODULES " + json.dumps([m for m in heavy if m in sys.modules]) + "\\n")
    atexit.register(report)
    sys.argv = ["grader", *sys.argv[1:]]
    from grader.__main__ import main
    main()
""")


def _imported(*args: str) -> tuple[list[str], subprocess.CompletedProcess]:
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    assert line, done.stderr
    return json.loads(line[-1].removeprefix("MODULES ")), done


@pytest.mark.parametrize("args", [["--help"], ["validate"], ["grade", "--help"]])
def test_light_commands_import_no_torch(args):
    modules, done = _imported(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert modules == [], f"`grader {' '.join(args)}` imported {modules}"


def test_a_failed_grade_loads_no_report(tmp_path):
    # A bad option value fails before grading: nothing heavy is needed, and
    # the server started early is killed at exit (no stray process).
    modules, done = _imported("grade", str(tmp_path), "--assignment", "no-such-assignment",
                              "--db", str(tmp_path / "g.db"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "matplotlib" not in modules


def test_importing_the_sandbox_package_imports_no_torch():
    code = "import sys, grader.sandbox, grader.sandbox.prestart; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize("argv, wanted", [
    (["grader", "grade", "subs"], True),
    (["grader", "watch", "subs"], True),
    (["grader", "grade", "subs", "--help"], False),
    (["grader", "grade", "subs", "--executor", "dask"], False),
    (["grader", "validate"], False),
    (["grader"], False),
])
def test_which_commands_start_the_server_early(argv, wanted):
    assert prestart.wants_early_server(argv) is wanted


def test_a_server_started_early_is_the_one_the_sandbox_takes(tmp_path):
    from grader.sandbox import Limits, Sandbox

    prestart.start_early()
    early = prestart._early
    assert early is not None
    pid = early[0].pid
    with Sandbox(Limits(timeout_s=20, cpu_s=10, memory_mb=2048, output_limit_kb=16, threads=1)) as box:
        assert box.info()["pid"] == pid
        assert prestart._early is None
    assert early[0].poll() is not None  # closed with the sandbox
