"""Grading beyond one machine: a Dask executor (``dask_executor``, the
coordinator's side; ``worker``, what runs in each worker process;
``preload``, the worker's start-up; ``cluster_doctor``, each worker's
sandbox layers) and the Gradescope autograder export (``gradescope``).

In:  the course and a class to grade.
Out: results from a Dask cluster into the same gradebook; the course as a
     Gradescope autograder.
"""
