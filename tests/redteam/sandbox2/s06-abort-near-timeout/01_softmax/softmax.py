"""Attack: abort() just before the timeout, hoping a crash is graded again."""
import os
import time


def softmax(x, dim=-1):
    time.sleep(3.5)
    os.abort()
