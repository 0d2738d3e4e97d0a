"""``grader watch``: feedback seconds after a student submits (issue 19).

``sources.py`` finds submissions (a plain folder, nbgrader's exchange),
``state.py`` remembers them and orders the queue fairly, ``run.py`` grades
them with a warm sandbox, ``feedback.py`` writes what the student fetches,
``session.py`` sets it all up from the command line's options.

In:  submissions as they arrive (a folder or nbgrader's exchange).
Out: each graded in a warm sandbox, recorded, and its feedback written where
     the student fetches it.
"""
