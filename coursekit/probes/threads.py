"""One thread for a probe that runs many small operations: the calls the
grader measures from outside the child, and the training probes.

On a second thread, PyTorch's small operations cost more than they save:
the pool's hand-offs and wake-ups, which the grader counts as work where it
reads a child's CPU time around a call (grader/sandbox/proc.py). 15's
tiled attention at n = 4096 took 2.5 s of CPU on two threads and 0.41 s
on one, in the same forked process.
"""
from __future__ import annotations

import torch


class OneThread:
    """``with OneThread():`` runs its body with ``torch.set_num_threads(1)``,
    and puts the child's thread count back afterwards."""

    def __enter__(self) -> None:
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.threads)
