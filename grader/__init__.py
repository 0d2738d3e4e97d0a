"""The instructor's side of the course: course validation, pitfall variants,
hidden checks, sandboxed grading, the gradebook, reports and releases.

Nothing here ships to students.
"""
