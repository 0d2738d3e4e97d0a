"""Public tests for exercise 01. Run: pytest exercises/01_softmax"""
import pytest
import torch

from coursekit import expect
from coursekit.probes.dispatch import FUSED_ATTENTION, SOFTMAX, all_ops, forbidden_kernels, recorded
from coursekit.probes.softmax import softmax_gradient, softmax_output

NEG_INF = float("-inf")


def test_matches_torch_on_a_vector(student):
    # The attention scores of the README's worked example, for the query "journey".
    scores = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    result = softmax_output(student, scores)
    expect.close(result["output"], torch.softmax(scores, dim=-1), what="softmax of the README's six scores", atol=1e-4)


def test_default_dim_is_the_last_one(student):
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    result = softmax_output(student, x)
    expect.close(
        result["output"], torch.softmax(x, dim=-1),
        what="softmax(x) of a (4, 5) input: each row normalised",
        pitfalls=["softmax-dim0"],
    )


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_dim_argument_on_a_3d_input(student, dim):
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(2))
    result = softmax_output(student, x, dim=dim)
    expect.close(
        result["output"], torch.softmax(x, dim=dim),
        what=f"softmax(x, dim={dim}) of a (2, 3, 4) input",
        pitfalls=["softmax-dim0"],
    )


def test_large_scores_do_not_overflow(student):
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    result = softmax_output(student, x)
    expect.close(
        result["output"], torch.softmax(x, dim=-1),
        what="softmax of scores around 1000 (exp(1000) overflows float32)",
        pitfalls=["softmax-overflow"],
    )


def test_blocked_entries_get_zero_weight(student):
    x = torch.tensor([[0.5, NEG_INF, 1.5, NEG_INF]])
    result = softmax_output(student, x)
    expect.close(result["output"], torch.softmax(x, dim=-1), what="softmax of a row with some -inf entries")


def test_fully_blocked_row_gives_zeros_not_nan(student):
    x = torch.tensor([[NEG_INF, NEG_INF, NEG_INF], [1.0, 2.0, 3.0]])
    expected = torch.cat([torch.zeros(1, 3), torch.softmax(x[1:], dim=-1)])
    result = softmax_output(student, x)
    expect.close(
        result["output"], expected,
        what="softmax of a row that is entirely -inf (a fully masked row)",
        pitfalls=["softmax-all-masked-nan"],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_keeps_the_dtype(student, dtype):
    x = torch.randn(3, 7, dtype=dtype, generator=torch.Generator().manual_seed(3))
    result = softmax_output(student, x)
    expect.close(result["output"], torch.softmax(x, dim=-1), what=f"softmax of a {dtype} input")


def test_does_not_modify_its_input(student):
    x = torch.randn(2, 6, generator=torch.Generator().manual_seed(4))
    result = softmax_output(student, x)
    expect.that(
        result["input_unchanged"], what="the input tensor after the call",
        expected="unchanged", actual="modified in place",
    )


def test_gradient_matches_torch(student):
    gen = torch.Generator().manual_seed(5)
    x, upstream = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    x_ref = x.clone().requires_grad_(True)
    (torch.softmax(x_ref, dim=-1) * upstream).sum().backward()
    expect.close(softmax_gradient(student, x, upstream), x_ref.grad, what="gradient of the softmax", atol=1e-5)


def test_fully_blocked_row_has_finite_gradient(student):
    x = torch.tensor([[NEG_INF, NEG_INF], [0.0, 1.0]])
    grad = softmax_gradient(student, x, torch.ones(2, 2))
    expect.that(
        bool(torch.isfinite(grad).all()), what="gradient through a fully -inf row",
        expected="finite everywhere (zeros)", actual=f"{grad.tolist()}",
        pitfalls=["softmax-all-masked-nan"],
    )


def test_uses_no_builtin_softmax(student):
    softmax_output(student, torch.zeros(3))  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="write it with exp and sum")
    # The grader's rule: the operators your softmax runs are recorded, and no
    # softmax kernel may be among them, whatever name reached it.
    gen = torch.Generator().manual_seed(6)
    x, upstream = torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen)
    ran = [*(all_ops(recorded(student, "coursekit.probes.softmax:softmax_output", [{"x": x}, {"x": x, "dim": 0}])) or []),
           *(all_ops(recorded(student, "coursekit.probes.softmax:softmax_gradient", [{"x": x, "upstream": upstream}])) or [])]
    kernels = forbidden_kernels(ran, [SOFTMAX, FUSED_ATTENTION])
    expect.that(not kernels, what="the PyTorch kernels your softmax ran",
                expected="no built-in softmax kernel: write it with exp and sum", actual=", ".join(kernels))
