"""A grading run over a class: the stage that drives the others.

In:  the course (grader/course/), a folder of submissions (read by
     grader/intake/), a sandbox (grader/sandbox/) and the gradebook.
Out: every (student, exercise) judged (grader/judge.py) and recorded in the
     gradebook as soon as it is known; lateness assessed; reports written.
     A crash or kill loses nothing recorded: rerunning resumes.

- ``grading.py``     ``grade_class``: collect -> pending -> judge -> record
- ``session.py``     ``grader grade``: options in, files out, a progress bar
- ``deadlines.py``   homework deadlines and extensions: each submission's lateness
- ``similarity.py``  ``grader similarity``: collect a class, list alike pairs
"""
