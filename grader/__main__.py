"""``python -m grader`` (and the ``grader`` command)."""
import sys


def main() -> None:
    # Before anything heavy is imported: a command that grades starts its
    # fork-server now, so the server's torch import runs beside ours.
    from grader.sandbox.prestart import start_for

    start_for(sys.argv)
    from grader.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
