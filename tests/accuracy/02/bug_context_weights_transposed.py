#: expect: loses
#: fails: [02-context-unbatched, 02-context-batched]
#: about: context vectors from the transposed weights (columns instead of rows)
#: not_hint: [normalize-by-sum, transpose-T-3d, softmax-wrong-dim]
"""Exercise 02, a submission: self-attention without trainable weights."""
import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token: (..., n, d) -> (..., n, n)."""
    # scores[..., i, j] = <x_i, x_j>: one matrix product against the inputs
    # with their last two dims swapped. transpose(-2, -1) leaves any leading
    # batch dims where they are; .T would reverse all of them.
    return inputs @ inputs.transpose(-2, -1)  # (..., n, d) @ (..., d, n) -> (..., n, n)


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of scores: (..., n, n) -> (..., n, n)."""
    # Row i holds query i's scores against every key, so normalise along the
    # keys (the last dim). Softmax keeps the order of the scores, makes every
    # weight positive (even for negative scores) and each row sum to one.
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """Each token replaced by the weighted average of all tokens: (..., n, d) -> (..., n, d)."""
    weights = attention_weights(attention_scores(inputs))  # (..., n, n)
    # Row i of the product is sum_j weights[i, j] * x_j: the context vector z_i.
    return weights.transpose(-2, -1) @ inputs  # (..., n, n) @ (..., n, d) -> (..., n, d)
