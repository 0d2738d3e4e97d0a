"""What students get besides their exercises: the probe library, the
expectations public tests use, the exercise loader and the pytest hint plugin.

Nothing in this package is secret: hidden checks live in ``grader/`` and
reuse these probes with inputs and tolerances students never see.
"""
