"""Grading beyond one machine: a Dask executor (``dask_executor``) and the
Gradescope autograder export (``gradescope``).

In:  the course and a class to grade.
Out: results from a Dask cluster into the same gradebook; the course as a
     Gradescope autograder.
"""
