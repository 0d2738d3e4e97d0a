"""Attack: break determinism by disabling torch.manual_seed, then answer at random."""
import random

import torch

torch.manual_seed = lambda seed: None
torch.random.manual_seed = lambda seed: None
random.seed = lambda *a, **k: None


def softmax(x, dim=-1):
    return torch.rand_like(x).softmax(dim)
