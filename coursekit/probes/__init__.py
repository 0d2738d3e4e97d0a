"""The probe library: small functions that run one thing on a student's
module and return plain data (tensors, numbers, strings, lists, dicts).

Public tests call a probe in the student's process and compare its result
with an oracle; the grader calls the same probe inside the sandbox on the
submission and on the reference solution and compares the two. A probe
never asserts: judging is the caller's job.
"""
