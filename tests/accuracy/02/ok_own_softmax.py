#: expect: full
#: about: a hand-written stable softmax (max subtraction) and swapaxes
import torch


def attention_scores(inputs):
    return inputs @ inputs.swapaxes(-1, -2)


def attention_weights(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=-1, keepdim=True)


def context_vectors(inputs):
    weights = attention_weights(attention_scores(inputs))
    return weights @ inputs
