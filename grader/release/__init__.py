"""Release the course: the students' repository, the exercises as notebooks,
and an nbgrader course directory for JupyterHub.

Everything here is generated from ``course.yaml`` and the exercise folders;
nothing released is ever edited by hand. What ships to students comes from
``exercises/`` and ``coursekit/`` only; references (``solutions/``) enter
nothing but the instructor's nbgrader source notebooks, between
``### BEGIN SOLUTION`` and ``### END SOLUTION``.

In:  the course, ``exercises/``, ``coursekit/`` (``solutions/`` only into
     the instructor's nbgrader sources).
Out: the students' repository, notebooks, the nbgrader course; scores
     pushed to nbgrader's gradebook.
"""
