"""The ``grader`` command, the instructor's way into the pipeline.

In:  the command line (options checked before any work: grader/cli/input_checks.py).
Out: one call of a pipeline function per command, an exit status, and short
     lines on the terminal (what was written where; problems on stderr).

- ``app.py``           the root app and its commands (validate, selftest, check,
                       grade, watch, similarity, adjust, sync-shipped, doctor, feedback)
- ``release.py``       ``grader release ...`` and ``grader push ...``
- ``exam.py``          ``grader exam ...``
- ``export.py``        ``grader export ...``
- ``input_checks.py``  the checks of options and arguments (exit 2, the option named)
"""
from grader.cli.app import app, main

__all__ = ["app", "main"]
