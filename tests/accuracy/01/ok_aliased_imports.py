#: expect: full
#: about: names imported from torch (exp, where, zeros_like), the max taken with amax and detached
from torch import exp, isinf, where, zeros_like


def softmax(x, dim=-1):
    shift = x.detach().amax(dim, keepdim=True)
    shift = where(isinf(shift), zeros_like(shift), shift)
    numer = exp(x - shift)
    denom = numer.sum(dim, keepdim=True)
    return numer / (denom + (denom == 0))
