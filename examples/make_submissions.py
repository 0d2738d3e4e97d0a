"""Regenerate examples/submissions/: a small class for the demo.

    python examples/make_submissions.py

- alice: a strong student: every exercise correct.
- bob: typical mistakes from the pitfall catalogue in several exercises.
- carol: stopped half-way: 01-04 done, the rest untouched stubs.
- dave: code that breaks: a syntax error, an import that raises, a loop
  that never ends, a memory hog, and one correct exercise.
- erin: hands in a zip of her whole checkout (exercises/ inside).
"""
from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

from grader.course import REPO_ROOT, load_course
from grader.course.pitfalls import load_variants

OUT = REPO_ROOT / "examples" / "submissions"
BOB_MISTAKES = {"01": "softmax-overflow", "03": "mask-minus-1e9", "05": "dropout-typo",
                "06": "cat-wrong-dim", "07": "pe-sin-cos-swapped", "09": "shared-layernorm"}
BROKEN = {
    "01": "def softmax(x, dim=-1)\n    return x\n",                                    # syntax error
    "02": "import torch\nraise RuntimeError('left over from my notebook')\n",          # raises at import
    "03": "import torch\n\n\ndef causal_mask(seq_len, device=None):\n    while True:\n        pass\n",  # hangs
    "05": "import torch\nHOG = [torch.ones(1 << 28) for _ in range(64)]\n",            # 64 GiB
}


def main(out: Path = OUT) -> None:
    course = load_course()
    shutil.rmtree(out, ignore_errors=True)

    def write(student: str, exercise, source: str, base: Path | None = None) -> None:
        folder = (base or out / student) / exercise.folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / exercise.module).write_text(source, encoding="utf-8")

    def reference(exercise) -> str:
        return (REPO_ROOT / "solutions" / exercise.folder / exercise.module).read_text(encoding="utf-8")

    def stub(exercise) -> str:
        return (REPO_ROOT / "exercises" / exercise.folder / exercise.module).read_text(encoding="utf-8")

    for exercise in course.exercises:
        write("alice", exercise, reference(exercise))
        mistake = BOB_MISTAKES.get(exercise.id)
        write("bob", exercise, load_variants(exercise, REPO_ROOT)[mistake].source if mistake else reference(exercise))
        write("carol", exercise, reference(exercise) if exercise.id <= "04" else stub(exercise))
        if exercise.id in BROKEN:
            write("dave", exercise, BROKEN[exercise.id])
        elif exercise.id == "04":
            write("dave", exercise, reference(exercise))
    checkout = out / "_erin"
    for exercise in course.exercises[:6]:
        write("erin", exercise, reference(exercise) if exercise.id != "02" else stub(exercise),
              base=checkout / "attention-course" / "exercises")
    (checkout / "attention-course" / "README.md").write_text("my checkout\n")
    with zipfile.ZipFile(out / "erin.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(checkout.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(checkout).as_posix())
    shutil.rmtree(checkout)
    print(f"wrote {sorted(p.name for p in out.iterdir())} to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
