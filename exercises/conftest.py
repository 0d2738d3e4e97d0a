# The course's pytest plugin: the `student` fixture, pitfall hints and the
# progress summary. Imported here (not via `pytest_plugins`) so that
# `pytest exercises/03` works from the repository root.
from coursekit.pytest_plugin import *  # noqa: F401,F403
