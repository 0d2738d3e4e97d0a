"""The course's proofs about itself, run on our own code, never on a student's.

In:  the course, its references (solutions/), untouched stubs (exercises/)
     and pitfall variants (grader/pitfalls/).
Out: a matrix per exercise showing that each promise holds: the reference
     scores full marks, the stub scores zero, and every pitfall variant
     loses points and gets its own hint (from the public tests and from the
     hidden checks alike).

- ``public_runs.py``   run the public tests against a reference, stub or variant
- ``selftest.py``      ``grader selftest``: the public tests' promise
- ``check_matrix.py``  ``grader check``: the hidden checks' promise
"""
