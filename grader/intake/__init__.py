"""Intake: reading what students hand in, following nothing and reading
nothing unbounded.

In:  a class folder of submissions (folders, zips, notebooks) and the course.
Out: for each student and exercise, a ``Submission`` (the module's text, or
     why it is unreadable), never a path into the student's files.

- ``tree.py``, ``archive.py``  a folder or zip read into an index of plain files
- ``names.py``, ``errors.py``  student ids and the fixed reasons of unreadable work
- ``identity.py``              who handed it in: one identity per id (case, look-alikes),
                               nbgrader inbound folders proved by their owner
- ``bounded_read.py``          reading a file with a size bound, following no link
- ``notebooks.py``             a module's answer cells taken out of a notebook
- ``submissions.py``           ``collect``: the class folder into ``Submission``s

A submission (a folder or a zip) is turned into a :class:`~grader.intake.tree.SubmissionTree`,
an index of its plain files and folders made without following a single
link: symbolic and hard links, FIFOs, sockets and devices are refused
wherever they sit, and every size and count is checked before anything is
read. Everything later (finding a module, a notebook) looks only at that
index, never at the student's files again.

Every way a submission can fail to be read raises :class:`Unreadable`
with a fixed reason (no text the student wrote): the student's own
``unreadable`` result, never an error of the class run.
"""
from grader.intake.errors import Unreadable
from grader.intake.tree import Blob, IntakeLimits, SubmissionTree, read_folder

__all__ = ["Blob", "IntakeLimits", "SubmissionTree", "Unreadable", "read_folder"]
