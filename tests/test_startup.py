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


def test_a_whole_grade_with_its_report_imports_no_matplotlib(tmp_path):
    # The class figures are SVG drawn as markup (grader/report/plots.py), and
    # a class of one has no pair for copydetect (which imports matplotlib).
    import shutil

    folder = tmp_path / "subs" / "student000" / "01_softmax"
    folder.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "01_softmax" / "softmax.py", folder)
    modules, done = _imported("grade", str(tmp_path / "subs"), "-e", "01", "--jobs", "1",
                              "--db", str(tmp_path / "g.db"), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "matplotlib" not in modules and "torch" in modules
    assert (tmp_path / "out" / "report" / "img" / "scores.svg").read_text().startswith("<svg")


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


# -- the course, read once per process ------------------------------------------------------

def _course_copy(tmp_path):
    import shutil

    from grader.course import load_course

    shutil.copy(REPO_ROOT / "course.yaml", tmp_path / "course.yaml")
    bank = load_course(check_files=False).exam_settings.questions
    if bank:
        (tmp_path / bank).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / bank, tmp_path / bank)
    return tmp_path / "course.yaml", bank


def test_the_course_is_read_once_while_its_files_are_unchanged(tmp_path):
    from grader.course import load_course

    path, _ = _course_copy(tmp_path)
    first = load_course(path, check_files=False)
    assert load_course(path, check_files=False) is first
    # Edited (same size, new time): read again, and the edit shows.
    text = path.read_text()
    path.write_text(text.replace("submissions_per_hour: 6", "submissions_per_hour: 7"))
    edited = load_course(path, check_files=False)
    assert edited is not first
    if "submissions_per_hour: 6" in text:
        assert edited.watch.submissions_per_hour == 7


def test_a_changed_question_bank_or_pitfall_file_reloads_the_course(tmp_path):
    import os

    from grader.course import load_course

    path, bank = _course_copy(tmp_path)
    first = load_course(path, check_files=False)
    if bank:
        os.utime(tmp_path / bank, ns=(1, 1))
        second = load_course(path, check_files=False)
        assert second is not first
        first = second
    # A pitfall variants file appearing where none was is a change too.
    exercise = first.exercises[0]
    (tmp_path / "grader" / "pitfalls").mkdir(parents=True)
    (tmp_path / "grader" / "pitfalls" / f"{exercise.folder}.yaml").write_text("{}\n")
    assert load_course(path, check_files=False) is not first


def test_a_broken_course_is_never_remembered(tmp_path):
    from grader.course import CourseError, load_course

    path, _ = _course_copy(tmp_path)
    good = path.read_text()
    path.write_text(good + "\nno_such_field: 1\n")
    with pytest.raises(CourseError):
        load_course(path, check_files=False)
    path.write_text(good)
    assert load_course(path, check_files=False).course.id


# -- exit without the interpreter's teardown ------------------------------------------------

@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (2, 2), (-1, 255), ("a message", 1)])
def test_a_command_that_loaded_torch_exits_with_its_status_output_and_atexit(code, status):
    program = textwrap.dedent(f"""
        import atexit, sys
        import grader.cli
        def command():
            import torch
            print("printed, unflushed", end="")
            atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
            sys.exit({code!r})
        grader.cli.main = command
        from grader.__main__ import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == status, done.stderr
    assert done.stdout == "printed, unflushed"
    assert "atexit ran" in done.stderr
    if isinstance(code, str):
        assert "a message" in done.stderr


def test_the_exit_waits_for_threads_that_are_not_daemons_and_still_skips_the_teardown():
    """`grader grade` removes its work folder in a thread while the reports
    are written: the exit waits for it, as the ordinary exit would, and an
    executor left open does not hang it. The teardown is still skipped: an
    object whose finaliser would print at teardown prints nothing."""
    program = textwrap.dedent("""
        import sys, threading, time
        from concurrent.futures import ThreadPoolExecutor
        import grader.cli
        class NoticesTeardown:
            def __del__(self):
                sys.stdout.write(" torn down")
        def command():
            import torch
            torch.kept = NoticesTeardown()
            pool = ThreadPoolExecutor(2)
            pool.submit(time.sleep, 0.05)
            def late_work():
                time.sleep(0.5)
                sys.stdout.write("thread done")
            threading.Thread(target=late_work).start()
            sys.exit(3)
        grader.cli.main = command
        from grader.__main__ import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "thread done"


@pytest.mark.parametrize("preset, wanted", [(None, "1"), ("3", "3")])
def test_the_grader_and_its_fork_server_start_one_openblas_thread_unless_told_otherwise(preset, wanted):
    """numpy's OpenBLAS pool spins at start-up on the cores the grader and
    its fork-server need for their torch imports: the entry point asks for
    one thread (inherited by the server it starts next), and keeps an
    instructor's own setting."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os, sys; sys.argv = ['grader', '--help']\n"
            "from grader.__main__ import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('OPENBLAS', os.environ.get('OPENBLAS_NUM_THREADS'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, env=env,
                          timeout=120)
    assert f"OPENBLAS {wanted}" in done.stdout.splitlines(), done.stdout + done.stderr


# -- the collector paused while torch is imported ---------------------------------------------

@pytest.mark.parametrize("enabled_before", [True, False])
def test_frozen_imports_pause_the_collector_then_freeze_what_they_made(enabled_before):
    import gc

    from coursekit.heap import frozen_imports

    class Made:
        pass

    was = gc.isenabled()
    try:
        gc.enable() if enabled_before else gc.disable()
        gc.unfreeze()
        with frozen_imports():
            assert not gc.isenabled()
            made = Made()
        assert gc.isenabled() == enabled_before
        assert gc.get_freeze_count() > 0
        assert not any(made is o for o in gc.get_objects())  # frozen: no generation holds it
        gc.unfreeze()
        with pytest.raises(ZeroDivisionError):
            with frozen_imports():
                1 / 0
        assert gc.isenabled() == enabled_before and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable() if was else gc.disable()


def test_the_fork_server_collects_garbage_again_after_its_warm_up():
    """The server warms up (torch's import) with the collector paused; its
    loop, and the children it forks, run with it on and the warm-up's heap
    frozen, as before."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import gc, sys
        from grader.sandbox import server
        server.warm_up()
        sys.stdout.write(f"{gc.isenabled()} {gc.get_freeze_count() > 0}")
    """)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout == "True True", done.stderr
