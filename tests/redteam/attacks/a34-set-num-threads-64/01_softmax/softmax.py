"""Attack: take 64 threads (a correct answer otherwise: grading must still finish and be right)."""
import torch

torch.set_num_threads(64)
torch.set_num_interop_threads = lambda n: None


def softmax(x, dim=-1):
    torch.set_num_threads(64)
    a = torch.randn(256, 256)
    for _ in range(5):
        a = (a @ a).tanh()  # a parallel op at 64 threads
    row_max = x.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(x - row_max)
    return exp / exp.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
