"""Attack: flood stdout (hoping to exhaust the grader's memory or hide output)."""
import sys

LINE = "10/10 PASSED " * 1000 + "\n"


def softmax(x, dim=-1):
    for _ in range(20000):
        sys.stdout.write(LINE)
    return x
