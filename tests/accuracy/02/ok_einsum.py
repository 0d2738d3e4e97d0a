#: expect: full
#: about: einsum for the scores and the context vectors
import torch


def attention_scores(inputs):
    return torch.einsum("...id,...jd->...ij", inputs, inputs)


def attention_weights(scores):
    return scores.softmax(dim=-1)


def context_vectors(inputs):
    weights = attention_weights(attention_scores(inputs))
    return torch.einsum("...ij,...jd->...id", weights, inputs)
