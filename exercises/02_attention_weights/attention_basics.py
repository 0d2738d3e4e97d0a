"""Exercise 02: self-attention without trainable weights (notes/01_attention.md §2).

Every token of a sequence looks at every token of the same sequence: the
dot products are the scores, a softmax over each row turns them into
weights, and the weighted average of the inputs is the context vector.
Shapes are batch-first: any number of leading batch dims, then
(n tokens, d features).
"""
import torch


def attention_scores(inputs: torch.Tensor) -> torch.Tensor:
    """Dot product of every token with every token.

    inputs:  (..., n, d), for example (n, d) or (batch, n, d)
    returns: (..., n, n) with scores[..., i, j] = dot(inputs[..., i, :], inputs[..., j, :])

    No scaling here (that comes in exercise 03). Work for any number of
    leading batch dims.
    """
    raise NotImplementedError("attention_scores(inputs): see README.md, section 'What to write'")


def attention_weights(scores: torch.Tensor) -> torch.Tensor:
    """Turn each row of scores into attention weights.

    scores:  (..., n_query, n_key)
    returns: the same shape; every weight >= 0 and each row
             (the last dim) sums to one

    torch.softmax is allowed here.
    """
    raise NotImplementedError("attention_weights(scores): see README.md, section 'What to write'")


def context_vectors(inputs: torch.Tensor) -> torch.Tensor:
    """Simplified self-attention: each token becomes the weighted sum of all tokens.

    inputs:  (..., n, d)
    returns: (..., n, d) with z[..., i, :] = sum_j weights[..., i, j] * inputs[..., j, :]

    Use your attention_scores and attention_weights. Do not modify `inputs`.
    """
    raise NotImplementedError("context_vectors(inputs): see README.md, section 'What to write'")
