"""The gradebook: where every result is recorded, and how it is read back.

In:  each (student, exercise) result as the judge scored it (grader/run/),
     the instructor's adjustments (``grader adjust``) and each submission's
     lateness (grader/run/deadlines.py).
Out: :class:`Record`s for the reports and exports (grader/report/), with the
     adjustment in effect and the late factor applied.

- ``records.py``      ``Key``, ``Record``: plain data, and the late factor applied to it
- ``adjustments.py``  the instructor's adjustments and their history
- ``store.py``        ``Gradebook``: one SQLite file, kill-safe, nothing overwritten
- ``session.py``      ``grader adjust``: options in, one adjustment (or the history) out
"""
from grader.gradebook.records import Key, Record
from grader.gradebook.store import Gradebook, GradebookError

__all__ = ["Gradebook", "GradebookError", "Key", "Record"]
