"""Attack: exit 0 before the checks can fail."""
import sys


def softmax(x, dim=-1):
    sys.exit(0)
