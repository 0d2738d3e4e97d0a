"""Attack: SIGKILL itself just before the 5 s timeout, hoping to be taken
for an OOM kill and graded a second time (a worker held twice as long)."""
import os
import signal
import time

import torch

KILLED = []


def softmax(x, dim=-1):
    if not KILLED:
        KILLED.append(1)
        time.sleep(3.5)
        try:
            os.kill(os.getpid(), signal.SIGKILL)
        except OSError:
            pass
    return torch.zeros_like(x)
