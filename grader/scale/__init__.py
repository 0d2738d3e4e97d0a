"""Grading beyond one machine: a Dask executor (``dask_executor``) and the
Gradescope autograder export (``gradescope``)."""
