#: expect: full
#: about: x @ x.mT and torch.nn.functional imported under an alias
import torch
import torch.nn.functional as fn


def attention_scores(inputs):
    return torch.matmul(inputs, inputs.mT)


def attention_weights(scores):
    return fn.softmax(scores, dim=scores.dim() - 1)


def context_vectors(inputs):
    return torch.matmul(attention_weights(attention_scores(inputs)), inputs)
