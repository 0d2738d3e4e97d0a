"""Regenerate the public tests' stored expected values (coursekit/fixtures)
from the references in solutions/: run after changing a reference or a
public test's inputs. Usage: python scripts/make_fixtures.py [name ...]"""
from __future__ import annotations

import sys

from grader.fixtures import FIXTURES, write


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        print(f"no fixture {', '.join(unknown)}; known: {', '.join(FIXTURES)}", file=sys.stderr)
        return 2
    for name in names or list(FIXTURES):
        print(f"wrote {write(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
