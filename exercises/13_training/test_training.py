"""Public tests for exercise 13. Run: pytest exercises/13_training

The model in most tests is the tests' own tiny language model (token and
position embeddings, dropout, a linear head), which records what each of its
forward passes saw: training or eval mode, gradients on or off, the input's
shape. Sampling is watched where PyTorch runs torch.multinomial: the tests
see the probabilities your generate() hands it, and answer with a fixed
token instead of a random one, so the tokens are known in advance. What a
correct solution gives there is stored (what the reference gives).
"""
import functools

import pytest
import torch

from coursekit import expect
from coursekit.fixtures import load as load_fixture
from coursekit.probes import sampling
from coursekit.probes import training as probes

MODEL = {"vocab_size": 9, "context_length": 6, "d_model": 8}


@functools.cache
def stored() -> dict[str, torch.Tensor]:
    """The stored values, by key (read on first use)."""
    return load_fixture("training_13")


def stored_parameters(key: str) -> list[dict[str, torch.Tensor]]:
    """The stored parameters after each step of ``key``, by name."""
    after: dict[int, dict[str, torch.Tensor]] = {}
    prefix = f"{key} parameters "
    for name, value in stored().items():
        if name.startswith(prefix):
            step, parameter = name[len(prefix):].split(" ", 1)
            after.setdefault(int(step), {})[parameter] = value
    return [after[step] for step in sorted(after)]


def random_batches(seed: int, count: int, batch: int = 3, n: int = 6, vocab: int = 9) -> list:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, vocab, (batch, n), generator=gen), torch.randint(0, vocab, (batch, n), generator=gen))
            for _ in range(count)]


# The public inputs (grader/fixtures.py stores what they give: keep both in step).
def step_cases() -> dict[str, tuple]:
    """train_step case -> (config, seed, batches, lr, grad_clip)."""
    return {"steps": (MODEL, 2, random_batches(2, 3), 0.5, 1e6),
            # A huge gradient (logits times 1000), clipped.
            "clip": ({**MODEL, "scale": 1000.0}, 3, random_batches(3, 1), 1.0, 0.5)}


def estimate_case() -> tuple:
    """(config, seed, batches) of estimate_loss."""
    return {**MODEL, "dropout": 0.5}, 5, random_batches(5, 4)


# (vocab, context, seed, prompt length, max_new_tokens, temperature, top_k)
SAMPLE_CASES = [*((7, 8, 10, 3, 4, temperature, None) for temperature in (1.0, 0.5, 2.0)),
                *((7, 8, 11, 2, 4, 0.8, top_k) for top_k in (1, 3, 6)),
                (9, 5, 12, 3, 6, 1.0, None)]


def sample_prompt(vocab: int, seed: int, n: int) -> torch.Tensor:
    return torch.randint(0, vocab, (2, n), generator=torch.Generator().manual_seed(seed))


def sample_key(case: tuple) -> str:
    return "sample " + " ".join(map(str, case))


def expect_parameters(got: list, expected: list, what: str, pitfalls=(), diagnose=None) -> None:
    for step, (mine, theirs) in enumerate(zip(got, expected), start=1):
        for name, value in theirs.items():
            expect.close(mine.get(name), value, atol=1e-9, rtol=1e-7, what=f"{what}: {name} after step {step}",
                         pitfalls=pitfalls, diagnose=diagnose)


# --- get_batch ------------------------------------------------------------------

@pytest.mark.parametrize("length,batch_size,context_length", [(40, 4, 8), (12, 64, 5)])
def test_get_batch_windows_and_shifted_targets(student, length, batch_size, context_length):
    facts = probes.batch_facts(**probes.batches(student, length, batch_size, context_length, draws=30, seed=length))
    what = f"get_batch(data of {length} tokens, batch_size={batch_size}, context_length={context_length})"
    expect.equal(facts["shapes"], [f"{(batch_size, context_length)} {(batch_size, context_length)}"],
                 what=what + ": shapes of x and y")
    expect.equal(facts["dtypes"], ["torch.int64 torch.int64"], what=what + ": dtypes of x and y")
    expect.that(facts["x_windows"], what=what + ": each row of x", expected="data[s : s + context_length]",
                actual="not a window of consecutive tokens of data")
    expect.that(facts["y_next"], what=what + ": each row of y",
                expected="data[s + 1 : s + 1 + context_length], the next token of each position",
                actual="y equals x" if facts["y_is_x"] else "another window", pitfalls=["targets-not-shifted"])
    expect.that(facts["starts_in_range"], what=what + ": window starts", expected="0 .. len(data) - context_length - 1",
                actual="a start outside that range")
    expect.that(facts["every_start_drawn"], what=what + ": window starts over 30 draws",
                expected="every start 0 .. len(data) - context_length - 1 drawn (the last one too)",
                actual="some start never drawn: is the range of torch.randint one too short?")


# --- compute_loss ----------------------------------------------------------------

def test_compute_loss_is_cross_entropy_over_every_position(student):
    (x, y), = random_batches(1, 1)
    result = probes.loss(student, MODEL, 1, x, y)
    what = "compute_loss(model, x, y) with x, y of shape (3, 6)"
    expect.that(result["scalar"], what=what, expected="a scalar tensor (0 dimensions)", actual="something else")
    expect.that(result["is_ce_of_y"], what=what,
                expected="F.cross_entropy(logits.flatten(0, 1), y.flatten()): the mean over all 18 positions",
                actual="another value" + (" (the cross-entropy against x)" if result["is_ce_of_x"] else ""),
                pitfalls=["targets-not-shifted"] if result["is_ce_of_x"] else [])
    expect.that(bool(result["grads"]) and all(g is not None for g in result["grads"].values()),
                what=what + ": loss.backward()", expected="a gradient for every parameter of the model",
                actual="no graph (a detached loss, or .item()?)")


# --- train_step ------------------------------------------------------------------

def test_train_step_takes_one_clean_step_per_batch(student):
    config, seed, batches, lr, grad_clip = step_cases()["steps"]
    result = probes.steps(student, config, seed, batches, lr=lr, grad_clip=grad_clip)
    what = "train_step(model, SGD(lr=0.5), x, y, grad_clip=1e6), three times"

    def diagnose():
        last = result["parameters"][-1]
        if all(torch.allclose(last[k], v, atol=1e-9) for k, v in stored_parameters("steps accumulated")[-1].items()
               if k in last):
            yield "zero-grad-forgotten"

    expect.that(result["floats"], what=what + ": the returned loss",
                expected="a Python float (loss.item())", actual="another type")
    expect_parameters(result["parameters"], stored_parameters("steps"), what, diagnose=diagnose)
    expect.close(result["losses"], stored()["steps losses"], atol=1e-9,
                 what=what + ": the losses returned (before each step)")


def test_train_step_clips_the_gradient_norm(student):
    # A huge gradient (logits times 1000): after clipping, SGD with lr=1
    # moves the parameters by exactly grad_clip in total norm.
    config, seed, batches, lr, grad_clip = step_cases()["clip"]
    result = probes.steps(student, config, seed, batches, lr=lr, grad_clip=grad_clip)
    start = probes.probe_model(config, seed)
    moved = torch.cat([(result["parameters"][0][name] - p.detach()).flatten() for name, p in start.named_parameters()
                       if name in result["parameters"][0]]).norm().item()
    expect.that(abs(moved - 0.5) < 1e-6, what="train_step(..., grad_clip=0.5) with SGD(lr=1) and a huge gradient",
                expected="the parameters move by 0.5 in total norm (nn.utils.clip_grad_norm_ after backward, "
                         "before step)", actual=f"they moved by {moved:.4g}")
    expect_parameters(result["parameters"], stored_parameters("clip"), "train_step with clipping")


def test_train_step_trains_in_training_mode(student):
    result = probes.steps(student, {**MODEL, "dropout": 0.1}, 4, random_batches(4, 2), lr=0.1, grad_clip=1.0)
    expect.equal(result["training"], [True, True], pitfalls=["train-mode-missing"],
                 what="training mode of the model's dropout during train_step's forward passes "
                      "(the model was left in eval mode before, as estimate_loss leaves it)")


# --- estimate_loss ---------------------------------------------------------------

def test_estimate_loss_in_eval_mode_without_gradients(student):
    result = probes.estimate(student, *estimate_case())
    what = "estimate_loss(model, 4 batches) on a model with dropout=0.5, left in training mode before"
    expect.equal(result["training"], [False] * 4, what=what + ": training mode during each forward pass",
                 pitfalls=["eval-mode-missing"])
    expect.equal(result["grad"], [False] * 4, what=what + ": gradients recorded during each forward pass "
                                                          "(torch.is_grad_enabled())", pitfalls=["eval-mode-missing"])
    expected = stored()["estimate"].item()
    got = result["loss"].item()
    # The hidden check's tolerance (atol 1e-9, rtol 1e-7): losses kept in a
    # float32 tensor before the mean (nanoGPT's estimate_loss) are right too.
    expect.that(abs(got - expected) <= 1e-9 + 1e-7 * abs(expected), what=what,
                expected=f"a Python float, the mean of the 4 losses in eval mode: {expected:.6f}",
                actual="not a Python float" if got != got else f"{got:.6f}")


# --- train -----------------------------------------------------------------------

def test_train_runs_the_loop_and_learns_a_periodic_text(student):
    config = {"vocab_size": 7, "context_length": 5, "d_model": 8, "dropout": 0.1}
    facts = probes.loop(student, config, 6, steps=60, batch_size=8, eval_every=25, eval_batches=3)
    what = "train(steps=60, batch_size=8, eval_every=25, eval_batches=3)"
    expect.equal(facts["n_train"], 60, what=what + ": len(history['train'])")
    expect.that(facts["train_floats"], what=what + ": history['train']", expected="Python floats",
                actual="other types")
    expect.equal(facts["val_steps"], [25, 50, 60], what=what + ": steps after which history['val'] has a loss")
    expect.equal(facts["shapes"], ["[8, 5]"], what=what + ": shapes of the model's inputs (batch_size, context_length)")
    expect.equal(facts["modes"], ["training=False grad=False", "training=True grad=True"],
                 what=what + ": (mode, gradients) of the model's forward passes",
                 pitfalls=["train-mode-missing", "eval-mode-missing"])
    expect.that(facts["learned"], what=what + " on a text that repeats 6 tokens",
                expected="the last held-out loss below a tenth of the untrained one", actual="it is not")


# --- generate --------------------------------------------------------------------

def expect_sample(student, vocab: int, context: int, seed: int, n: int, new: int, temperature: float, top_k):
    idx = sample_prompt(vocab, seed, n)
    got = sampling.sample(student, vocab, context, seed, idx, new, temperature, top_k)
    key = sample_key((vocab, context, seed, n, new, temperature, top_k))
    want = {"out": stored()[f"{key} out"], "probs": stored()[f"{key} probs"],
            "lengths": stored()[f"{key} lengths"].tolist()}
    what = (f"generate(model, idx of shape (2, {n}), max_new_tokens={new}, temperature={temperature}, "
            f"top_k={top_k}), model.context_length={context}")
    expect.that(max(got["lengths"], default=0) <= context, what=what + ": lengths of the windows fed to the model",
                expected=f"at most context_length = {context}: {want['lengths']}", actual=f"{got['lengths']}",
                pitfalls=["context-not-cropped"])
    expect.equal(got["lengths"], want["lengths"], what=what + ": lengths of the windows fed to the model")
    expect.equal(got["training"], [False], what=what + ": training mode during generation (model.eval())",
                 pitfalls=["eval-mode-missing"])
    expect.equal(got["grad"], [False], what=what + ": gradients recorded during generation (torch.no_grad())",
                 pitfalls=["eval-mode-missing"])
    expect.equal(got["draws"], new, what=what + ": calls of torch.multinomial (one per new token)")
    kept = (got["probs"] > 0).sum(-1)

    def diagnose():
        if top_k is None and torch.allclose(got["probs"], stored()[f"{key} untempered probs"], atol=1e-6):
            yield "temperature-ignored"
        if top_k is not None and bool((kept == top_k + 1).all()):
            yield "top-k-keeps-k-plus-one"
        if top_k is not None and bool((kept == vocab).all()):
            yield "top-k-mask-zero"
        if max(got["lengths"], default=0) > context:
            yield "context-not-cropped"

    if top_k is not None:
        expect.that(bool((kept == top_k).all()), what=what + ": tokens of non-zero probability at each draw",
                    expected=f"exactly top_k = {top_k}", actual=f"{sorted(set(kept.tolist()))}", pitfalls=list(diagnose()))
    expect.close(got["probs"], want["probs"], atol=1e-6, check_dtype=False,
                 what=what + ": the probabilities handed to torch.multinomial, at every step", diagnose=diagnose)
    expect.equal(got["out"].tolist() if got["out"] is not None else None, want["out"].tolist(),
                 what=what + ": the tokens returned (the prompt, then one drawn token per step)")
    expect.that(got["idx_unchanged"], what=what + ": idx after the call", expected="unchanged", actual="modified")


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_generate_samples_softmax_of_logits_over_temperature(student, temperature):
    expect_sample(student, vocab=7, context=8, seed=10, n=3, new=4, temperature=temperature, top_k=None)


@pytest.mark.parametrize("top_k", [1, 3, 6])
def test_generate_top_k_keeps_exactly_k(student, top_k):
    expect_sample(student, vocab=7, context=8, seed=11, n=2, new=4, temperature=0.8, top_k=top_k)


def test_generate_feeds_at_most_the_context(student):
    # 3 prompt tokens and 6 new ones with a context of 5: the windows grow
    # to 5 tokens, then slide (the last 5 tokens).
    expect_sample(student, vocab=9, context=5, seed=12, n=3, new=6, temperature=1.0, top_k=None)


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_generate_refuses_a_temperature_that_is_not_positive(student, temperature):
    # logits / 0 is inf or NaN: T must be > 0 (T -> 0 is the argmax, which
    # a caller asks for by top_k=1, not by dividing by zero).
    model = sampling.ScriptedLM(7, 8, seed=13)
    idx = torch.zeros(1, 2, dtype=torch.long)
    try:
        student.generate(model, idx, 2, temperature=temperature, generator=torch.Generator().manual_seed(0))
        raised = "nothing"
    except ValueError:
        raised = "ValueError"
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - what the student's code raised, named in the failure
        raised = type(exc).__name__
    expect.equal(raised, "ValueError",
                 what=f"generate(model, idx, 2, temperature={temperature}): the exception raised (T must be > 0)")
