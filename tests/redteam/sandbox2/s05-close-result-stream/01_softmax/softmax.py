"""Attack: close the result stream (fd 4) and live on, hoping the grader's
kill that follows counts as a kill from outside (graded again)."""
import os
import time


def softmax(x, dim=-1):
    os.close(4)
    time.sleep(30)
    return x
