"""``python -m grader`` (and the ``grader`` command)."""
import os
import sys


def main() -> None:
    # numpy (imported with torch) starts OpenBLAS's thread pool, whose threads
    # spin for ~0.1 s of CPU at start-up, here and in the fork-server, on the
    # cores both need for their own torch imports (a class of one: 1.78 ->
    # 1.69 s, median of 6). Nothing here does BLAS work worth a second thread,
    # and a sandboxed child never starts one. An explicit setting is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Before anything heavy is imported: a command that grades starts its
    # fork-server now, so the server's torch import runs beside ours.
    from grader.sandbox.prestart import start_for

    start_for(sys.argv)
    from grader.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as done:
        if "torch" not in sys.modules:
            raise
        _exit_without_teardown(done.code)
    else:
        if "torch" in sys.modules:
            _exit_without_teardown(0)


def _exit_without_teardown(code: object) -> None:
    """End the process as ``sys.exit(code)`` would, minus the interpreter's
    teardown of every module, which costs ~0.4 s of CPU once torch is
    loaded (a third of `grader grade`'s fixed cost beyond ``import torch``).
    What an exit must do still happens: the atexit handlers (temporary
    folders, logging, a fork-server never used), flushed output, the exit
    status, and the wait for threads that are not daemons: ``grader
    grade`` removes its work folder in one while the reports are written,
    and it was usually still running when the command ended, which made
    every such run pay the teardown after all. They are waited for as the
    ordinary exit waits (``threading._shutdown``: executors' workers told to
    stop, then every such thread joined); where this Python has no such
    function, a live one sends the exit the ordinary way."""
    import atexit
    import os
    import threading

    wait_for_threads = getattr(threading, "_shutdown", None)
    if not callable(wait_for_threads) and any(
            t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        status = 1
    if callable(wait_for_threads):
        wait_for_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 1  # e.g. a closed pipe: the ordinary exit would report it too
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
