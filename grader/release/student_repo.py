"""The repository students clone, generated from this one.

What it holds, and only that::

    exercises/NN_slug/        README.md, README.zh.md, the stub, test_*.py (and NN_slug.ipynb)
    exercises/conftest.py     loads the hint plugin
    coursekit/                the probe library, expectations, the hint plugin, the notebook runner
    notes/                    the course's notes (English and Chinese), which the READMEs cite
    docs/figures/             the figures the READMEs show (SVG)
    course.yaml               the students' view: exercises and pitfall hints (see student_course_data)
    README.md, pyproject.toml, requirements.txt, .gitignore

Nothing from ``solutions/`` or ``grader/`` is copied; :func:`find_leaks`
searches the written tree for what must never be there (distinctive lines
of the references, the pitfall variants' edits, hidden check ids) and the
command refuses a release where it finds any.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from grader.course import Course, Exercise
from grader.course.pitfalls import load_variants, variants_file
from grader.release.common import ReleaseError, available_exercises, notebook_name, student_course_data

TORCH_PIN = "torch==2.13.0"
REQUIREMENTS = [TORCH_PIN, "numpy", "pytest", "pyyaml"]
# Lines shorter than this are too generic to prove a leak (``return x``).
MIN_LEAK_LINE = 16
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".ipynb", ".json"}
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = {name!r}
version = {version!r}
description = {description!r}
requires-python = ">=3.11"
dependencies = {dependencies}

[project.optional-dependencies]
# For the exercises as notebooks (exercises/NN_slug/NN_slug.ipynb).
notebook = ["notebook", "ipykernel"]

[tool.setuptools.packages.find]
include = ["coursekit*"]

[tool.pytest.ini_options]
# importlib mode: exercises have test files and modules with the same names.
addopts = "--import-mode=importlib --tb=short"
# coursekit is importable from a fresh clone even before `pip install -e .`.
pythonpath = ["."]
testpaths = ["exercises"]
markers = [
    "pitfalls(*ids): pitfall ids whose hints a failure of this test shows",
    "training: trains a model for seconds; runs with --train or when its file is named",
]
'''

GITIGNORE = ".venv/\n__pycache__/\n*.pyc\n*.egg-info/\n.pytest_cache/\n.ipynb_checkpoints/\n"


def _readme(course: Course, exercises: list[Exercise], notebooks: bool) -> str:
    rows = "\n".join(f"| `exercises/{e.folder}` | {e.title.en} | {e.title.zh} | {e.points:g} |" for e in exercises)
    notebook_part = (
        "\nPrefer Jupyter? Each folder also has `NN_slug.ipynb`: the same instructions, the stub in\n"
        "its answer cell and one cell per public test. Install with `pip install -e '.[notebook]'`.\n"
        "Hand in either the module or the notebook: if you work in the notebook, leave the module\n"
        "untouched (the grader then reads the notebook's answer cell).\n"
    ) if notebooks else ""
    return f"""# {course.course.title.en} · {course.course.title.zh}

## Setup

```bash
python3 -m venv .venv && source .venv/bin/activate
pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # first: the CPU build
pip install -e .          # torch 2.13.0, pytest, numpy, pyyaml and the course's test helpers
```

Install torch's CPU build first, as above: a plain `pip install torch` (or `pip install -e .`
alone) downloads several GB of CUDA packages that this course never uses.

## Working on an exercise

Each exercise is a folder under `exercises/`: read its `README.md` (中文：`README.zh.md`), fill in
the stub (the module named in the table of the README), and run its public tests:

```bash
pytest exercises/01_softmax        # one exercise
pytest exercises                   # all of them, with a progress table at the end
pytest exercises --train           # the training tests too (11 and 13: seconds of training each)
```

- `not implemented yet: ...` means the function still raises the stub's `NotImplementedError`;
- otherwise the failure says what was checked, what was **expected** and what your code **got**;
- when the failure matches a mistake many students make, a section `hint [pitfall-id]` explains it
  in English and Chinese.

The public tests are a subset of what the grader checks: passing them is necessary, not sufficient.
The ideas behind the exercises are in `notes/` (中文：`notes/README.zh.md`).
{notebook_part}
| folder | exercise | 练习 | points |
|---|---|---|---|
{rows}
"""


def _copy_exercise(exercise: Exercise, root: Path, out: Path) -> None:
    source = root / "exercises" / exercise.folder
    # Never the notebook of an earlier release lying in the instructor's tree.
    shutil.copytree(source, out / "exercises" / exercise.folder,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "*.ipynb"))


def _clear(out: Path, force: bool) -> None:
    """An empty ``out``; with ``force`` an earlier release is replaced,
    keeping ``.git`` (the instructor may commit releases to the students' repo)."""
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"{out} is not empty (use --force to replace an earlier release; .git is kept)")
        for child in out.iterdir():
            if child.name == ".git":
                continue
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)


ALL = "all"


def exercises_through(course: Course, through: str = ALL) -> list[Exercise]:
    """The exercises of the assignments up to and including ``through``, in
    course order (``"all"``: every exercise). Release ``through`` an
    assignment once the assignments before it are over: what its exercises
    ship as working code comes from those (course.yaml checks it)."""
    if through == ALL:
        return list(course.exercises)
    ids = [a.id for a in course.assignments]
    if through not in ids:
        raise ReleaseError(f"no assignment {through!r}; choose one of {', '.join(ids)} or {ALL}")
    chosen = {e for a in course.assignments[:ids.index(through) + 1] for e in a.exercises}
    return [e for e in course.exercises if e.id in chosen]


def shipped_solutions(exercises: list[Exercise]) -> list[str]:
    """The exercise ids whose reference these exercises ship as working code."""
    return sorted({shipped for e in exercises for shipped in e.ships})


def write_student_repo(course: Course, root: Path, out: Path, *, notebooks: bool = True,
                       force: bool = False, through: str = ALL) -> list[Exercise]:
    """Write the students' repository: the exercises of the assignments up to
    ``through`` (see :func:`exercises_through`) that have a stub."""
    exercises = available_exercises(course, root, [e.id for e in exercises_through(course, through)])
    if not exercises:
        raise ReleaseError("no exercise has a stub under exercises/ yet")
    _clear(out, force)
    for exercise in exercises:
        _copy_exercise(exercise, root, out)
        if notebooks:
            from grader.release.notebooks import build_notebook, write_notebook

            write_notebook(build_notebook(course, exercise, root, with_solution=False),
                           out / "exercises" / exercise.folder / f"{notebook_name(exercise)}.ipynb")
    shutil.copyfile(root / "exercises" / "conftest.py", out / "exercises" / "conftest.py")
    shutil.copytree(root / "coursekit", out / "coursekit", ignore=_IGNORE)
    if (root / "notes").is_dir():  # the READMEs cite its sections
        shutil.copytree(root / "notes", out / "notes", ignore=_IGNORE)
    if (root / "docs" / "figures").is_dir():  # the READMEs show its figures (SVG only, not the script)
        (out / "docs" / "figures").mkdir(parents=True)
        for figure in sorted((root / "docs" / "figures").glob("*.svg")):
            shutil.copyfile(figure, out / "docs" / "figures" / figure.name)
    header = ("# The course as students' tools read it (the hint plugin, the notebook runner).\n"
              "# Generated by `grader release student` from the instructor's course.yaml.\n")
    data = student_course_data(course, exercises)
    (out / "course.yaml").write_text(header + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100),
                                     encoding="utf-8")
    name = (course.release.get("student_repo") or {}).get("name") or f"{course.course.id}-student"
    (out / "pyproject.toml").write_text(PYPROJECT.format(
        name=name, version=course.course.version, description=course.course.title.en,
        dependencies=json.dumps(REQUIREMENTS)), encoding="utf-8")
    (out / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n", encoding="utf-8")
    (out / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    (out / "README.md").write_text(_readme(course, exercises, notebooks), encoding="utf-8")
    return exercises


# --- what must never be released --------------------------------------------------

def hidden_check_ids(root: Path) -> list[str]:
    """The ids of the hidden checks in ``grader/checks/*.py``, read from the
    source (importing the checks needs the sandbox)."""
    ids = []
    for path in sorted((root / "grader" / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "id" and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                        ids.append(keyword.value.value)
    return ids


def secret_lines(course: Course, root: Path, released: list[Exercise] | None = None) -> dict[str, list[str]]:
    """Lines that prove a leak, by origin: each reference's lines that its
    stub lacks, and the lines the pitfall variants' edits write. References
    that the ``released`` exercises (default: all) ship as working code are
    not secret; every other reference is, shipped copies elsewhere or not."""
    found: dict[str, list[str]] = {}
    shipped = set(shipped_solutions(course.exercises if released is None else released))
    # The shipped copies of references that are still secret.
    copies = {root / "exercises" / e.folder / course.exercise(s).module
              for e in course.exercises for s in e.ships if s not in shipped}
    # Text students get by design (stubs, public tests, READMEs, coursekit,
    # the hints, the references this release ships): a line found there
    # proves nothing, however much it looks like a solution.
    public = "\n".join([
        *(p.read_text(encoding="utf-8", errors="replace") for folder in ("exercises", "coursekit")
          for p in sorted((root / folder).rglob("*"))
          if p.is_file() and p.suffix in TEXT_SUFFIXES and p not in copies),
        *(f"{p.hint.en}\n{p.hint.zh}" for p in course.pitfalls),
    ])

    def distinctive(lines: set[str]) -> list[str]:
        return sorted(line for line in lines if len(line) >= MIN_LEAK_LINE and line not in public)

    for exercise in available_exercises(course, root):
        reference = root / "solutions" / exercise.folder / exercise.module
        if not reference.is_file():
            continue
        reference_lines = {line.strip() for line in reference.read_text(encoding="utf-8").splitlines()}
        if exercise.id not in shipped:
            found[f"solutions/{exercise.folder}/{exercise.module}"] = distinctive(reference_lines)
        if variants_file(exercise.folder, root).is_file():
            variant_lines = {line.strip() for variant in load_variants(exercise, root).values()
                             for line in variant.source.splitlines()}
            found[f"grader/pitfalls/{exercise.folder}.yaml"] = distinctive(variant_lines - reference_lines)
    return found


def _released_texts(tree: Path):
    for path in sorted(tree.rglob("*")):
        if ".git" in path.relative_to(tree).parts or not path.is_file() or path.suffix not in TEXT_SUFFIXES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".ipynb":
            # Search the cells as written, not their JSON escaping.
            try:
                cells = json.loads(text).get("cells", [])
                text = "\n".join("".join(c.get("source", "")) for c in cells)
            except (json.JSONDecodeError, AttributeError):
                pass
        yield path, text


def find_leaks(tree: Path, course: Course, root: Path, released: list[Exercise] | None = None) -> list[str]:
    """Everything in ``tree`` that comes from the instructor's side, each
    as ``file: what``; empty for a clean release of the ``released``
    exercises (default: all; their shipped modules are allowed)."""
    leaks = [f"{name}/: instructor-only folder" for name in ("solutions", "grader") if (tree / name).exists()]
    secrets = secret_lines(course, root, released)
    check_ids = hidden_check_ids(root)
    for path, text in _released_texts(tree):
        where = path.relative_to(tree)
        for origin, lines in secrets.items():
            leaks += [f"{where}: line of {origin}: {line!r}" for line in lines if line in text]
        leaks += [f"{where}: hidden check id {check_id!r}" for check_id in check_ids if check_id in text]
    return leaks


def publish_student_repo(course: Course, root: Path, out: Path, *, notebooks: bool, force: bool, through: str) -> int:
    """``grader release student``: write the repository, say which working
    solutions it holds, and check it leaks nothing. 0 when it may be
    published, 1 when it must not (a leak, or the release failed)."""
    try:
        written = write_student_repo(course, root, out, notebooks=notebooks, force=force, through=through)
    except ReleaseError as exc:
        print(f"release failed: {exc}", file=sys.stderr)
        return 1
    if shipped := shipped_solutions(written):
        owners = {e: a.id for a in course.assignments for e in a.exercises}
        print("it holds the working solutions of " + ", ".join(f"{e} ({owners.get(e, 'no assignment')})"
              for e in shipped) + ": publish it only once those assignments are over", file=sys.stderr)
    leaks = find_leaks(out, course, root, written)
    for leak in leaks:
        print(f"LEAK {leak}", file=sys.stderr)
    if leaks:
        print(f"{out}: {len(leaks)} instructor-only text(s) found: do not publish this release", file=sys.stderr)
        return 1
    print(f"{out}: {len(written)} exercises ({', '.join(e.folder for e in written)}); no leak found")
    print(commit_release(out, f"Release of {course.course.id} {course.course.version}, through {through}"))
    return 0


def commit_release(out: Path, message: str) -> str:
    """Make ``out`` a git repository (``git init`` once) and commit the
    release, only after its leak check passed: the repository students clone
    starts with a commit. The instructor's git configuration (hooks, signing)
    plays no part; the commit's author is the course. Returns what was done."""
    git = shutil.which("git")
    if git is None:
        return "git not found: the release is a plain folder (install git, then `git init` and commit it)"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "course staff", "GIT_AUTHOR_EMAIL": "course@localhost",
           "GIT_COMMITTER_NAME": "course staff", "GIT_COMMITTER_EMAIL": "course@localhost"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([git, "-C", str(out), "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
                               *args], env=env, capture_output=True, text=True, timeout=120)

    if not (out / ".git").exists() and run("init", "-q", "-b", "main").returncode != 0:
        return "git init failed: the release is a plain folder"
    run("add", "-A")
    if run("diff", "--cached", "--quiet").returncode == 0:
        return f"{out}: nothing changed since the last commit of the release"
    done = run("commit", "-q", "-m", message)
    return f"{out}: committed ({message})" if done.returncode == 0 else f"git commit failed: {done.stderr.strip()[:200]}"
