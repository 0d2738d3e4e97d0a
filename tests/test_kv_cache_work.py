"""Exercise 14 pays for a cache that caches (issue 36): values right
without the work earn nothing. The grader measures from outside the child
what a cached step, generate_cached and generate_batch cost at a context of
512 (grader/checks/work.py), against the reference's costs in its own run;
every other check of 14 counts only once that passes. Attacks written as a
student would: a "cache" of token ids that recomputes the whole prefix at
every step, and stubs left in place with generation by recomputation."""
from __future__ import annotations

import pytest

from grader.checks.work import verdict
from grader.course import REPO_ROOT
from grader.intake.submissions import assemble

REFERENCE = (REPO_ROOT / "solutions" / "14_kv_cache" / "kv_cache.py").read_text()
RECOMPUTED = "each step recomputed the whole prefix"

# Keeps the token ids (and the padding mask) and runs the whole prefix through
# a fresh real cache at every call: every value right, nothing saved.
TOKEN_ID_CACHE = REFERENCE.replace("KVCache", "_RealCache").replace(
    "def forward_cached(", "def _forward_from_scratch(").replace(
    "forward_cached(model", "_forward_from_scratch(model") + '''

class KVCache(_RealCache):
    def __init__(self, num_layers, context_length):
        super().__init__(num_layers, context_length)
        self.ids = None

    def __len__(self):
        return 0 if self.ids is None else self.ids.size(1)


def forward_cached(model, idx, cache, pad_mask=None):
    everything = idx if cache.ids is None else torch.cat([cache.ids, idx], dim=1)
    if everything.size(1) > cache.context_length:
        raise ValueError("past the context")
    logits = _forward_from_scratch(model, everything, _RealCache(len(model.blocks), cache.context_length), pad_mask)
    cache.ids = everything
    return logits[:, -idx.size(1):]
'''

# forward_cached caches what has no padding mask and recomputes the whole
# prefix when one is given.
CACHES_ONLY_UNPADDED = TOKEN_ID_CACHE.replace(
    "def forward_cached(model, idx, cache, pad_mask=None):\n",
    "def forward_cached(model, idx, cache, pad_mask=None):\n"
    "    if pad_mask is None and cache.ids is None or getattr(cache, 'real', False):\n"
    "        cache.real = True\n"
    "        return _forward_from_scratch(model, idx, cache, pad_mask)\n").replace(
    "        return 0 if self.ids is None else self.ids.size(1)",
    "        if getattr(self, 'real', False):\n"
    "            return _RealCache.__len__(self)\n"
    "        return 0 if self.ids is None else self.ids.size(1)")

# KVCache and forward_cached left as the stub has them; generation recomputes.
STUBS_AND_RECOMPUTATION = '''
import torch


class KVCache:
    def __init__(self, num_layers, context_length):
        raise NotImplementedError


def forward_cached(model, idx, cache, pad_mask=None):
    raise NotImplementedError


@torch.no_grad()
def generate_cached(model, idx, max_new_tokens):
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.context_length:])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


@torch.no_grad()
def generate_batch(model, prompts, max_new_tokens, pad_id):
    if max(len(p) for p in prompts) + max_new_tokens > model.context_length:
        raise ValueError("too long")
    return [generate_cached(model, p[None], max_new_tokens)[0] for p in prompts]
'''


# Real forward_cached; generation with no cache at all: recomputed on small
# inputs, and at the measured size (a context of 512) the prompt's last token
# repeated, which is what a model with tied weights decodes greedily there.
GUESSED_AT_THE_MEASURED_SIZE = REFERENCE + '''

_cached_batch = generate_batch


@torch.no_grad()
def generate_cached(model, idx, max_new_tokens):
    if model.context_length >= 512:
        return torch.cat([idx, idx[:, -1:].repeat(1, max_new_tokens)], 1)
    for _ in range(max_new_tokens):
        idx = torch.cat([idx, model(idx[:, -model.context_length:])[:, -1].argmax(-1, keepdim=True)], 1)
    return idx


@torch.no_grad()
def generate_batch(model, prompts, max_new_tokens, pad_id):
    if model.context_length >= 512:
        return [torch.cat([p, p[-1:].repeat(max_new_tokens)]) for p in prompts]
    return _cached_batch(model, prompts, max_new_tokens, pad_id)
'''


def _grade(course, judge, source: str, tmp_path):
    exercise = course.exercise("14")
    folder = assemble(exercise, source.encode(), tmp_path / "submission", course)
    return judge.grade(exercise, folder, tmp_path / "work")


def test_the_rule_decides_only_far_from_its_threshold():
    # cheap 10, full 1000: threshold 100, no verdict between 50 and 200
    assert [verdict(s, 10, 1000) for s in (12, 49, 51, 199, 201, 900)] == \
        ["pass", "pass", "could not tell", "could not tell", "fail", "fail"]
    assert verdict(10, 10, 50) == "could not tell"      # the reference shows no gap here
    assert verdict(None, 10, 1000) == "could not tell"  # /proc could not tell


def test_a_unit_of_recomputation_leaves_out_what_every_call_pays_once():
    from grader.checks import CouldNotTell, text
    from grader.checks.work import Cost, cheaper_than_recomputing, yardstick_calls
    from grader.sandbox import CallResult, ProbeCall, RunResult

    def run(*cpu):
        return RunResult("ok", [CallResult(ok=True, value=1, cpu_s=c) for c in cpu], "ok", "", "", 0.1)

    timed = ProbeCall("coursekit.probes.kv_cache_cost:cost_generation", {})
    inputs = [timed, *yardstick_calls("coursekit.probes.kv_cache_cost:cost_full", {"config": {}, "seed": 0})]
    assert inputs[1].probe == "coursekit.probes.kv_cache_cost:cost_model"   # the model is built ahead
    assert [c.kwargs["repeats"] for c in inputs[2:]] == [1, 3]
    # Each call pays 0.02 s of its own traffic, a forward costs 0.05 s: the unit
    # is 0.05 s, so recomputing 10 forwards costs 0.5 s, not 0.7 s, and 0.45 s
    # of work fails. The build call's 0.3 s enters no figure.
    rule = cheaper_than_recomputing([Cost(timed.probe, inputs[2].probe, 10, text("recomputed", "重新计算"))],
                                    could_not_tell=text("too near", "太接近"))
    reference = run(0.06, 0.3, 0.07, 0.17)
    assert rule(inputs, run(0.45, 0.3, 0.07, 0.17), reference) == "recomputed / 重新计算"
    assert rule(inputs, run(0.06, 0.3, 0.07, 0.17), reference) is None
    undecided = rule(inputs, run(0.2, 0.3, 0.07, 0.17), reference)
    assert isinstance(undecided, CouldNotTell)
    assert undecided.detail.startswith("cost_generation: spent 0.200 s of CPU; the reference 0.060 s, recomputing 0.500 s")


def test_a_model_built_ahead_is_the_timed_calls_and_only_theirs():
    from coursekit.probes import kept

    built = []

    def build(module, config, seed):
        built.append(seed)
        return object()

    kept.build_ahead(build, None, {"d": 1}, 7)
    first = kept.built(build, None, {"d": 1}, 7)
    assert kept.built(build, None, {"d": 1}, 7) is first and built == [7]   # timed calls build nothing
    assert kept.built(build, None, {"d": 1}, 8) is not first and built == [7, 8]   # another model is built
    kept.build_ahead(build, None, {"d": 1}, 9)   # the next check's model replaces it
    assert kept.built(build, None, {"d": 1}, 7) is not first
    kept._MODELS.clear()   # a child that empties the store only builds again, in its own timed call
    assert kept.built(build, None, {"d": 1}, 9) is not None and built[-1] == 9


@pytest.mark.parametrize("source", [TOKEN_ID_CACHE, STUBS_AND_RECOMPUTATION], ids=["token-ids", "stubs"])
def test_values_without_the_work_earn_nothing(course, judge, source, tmp_path):
    result = _grade(course, judge, source, tmp_path)
    assert result.points <= 0.01, [(v.check_id, v.points) for v in result.verdicts if v.points]
    cost = next(v for v in result.verdicts if v.check_id == "14-cache-cost")
    assert not cost.passed
    if source is TOKEN_ID_CACHE:
        # Every value is right: only the work is missing, and the student is told so.
        assert RECOMPUTED in cost.reason and "重新计算" in cost.reason
        waiting = {v.check_id for v in result.verdicts if v.kind == "requires"}
        assert {"14-steps", "14-chunks", "14-generate", "14-padding", "14-batch"} <= waiting


def test_a_correct_cache_written_otherwise_earns_everything(course, judge, tmp_path):
    source = (REPO_ROOT / "tests" / "accuracy" / "14" / "ok_dict_cache_additive_mask.py").read_text()
    result = _grade(course, judge, source, tmp_path)
    assert result.points == pytest.approx(result.max_points), [(v.check_id, v.reason) for v in result.verdicts]


def test_a_rule_that_could_not_tell_fails_the_check_as_its_own_kind_with_no_pitfall():
    from grader.checks import COULD_NOT_TELL, Check, CouldNotTell, text
    from grader.failures import check_failure
    from grader.judge import NO_MISTAKE_TO_EXPLAIN
    from grader.sandbox import CallResult, ProbeCall, RunResult

    call = ProbeCall("coursekit.probes.kv_cache_cost:cost_full", {})
    run = RunResult("ok", [CallResult(ok=True, value=1, cpu_s=0.5)], "ok", "", "", 0.1)
    check = Check(id="x", message=text("x", "x"), calls=lambda gen: [call], compare=lambda a, b: None,
                  run_rule=lambda inputs, mine, reference: CouldNotTell("too near / 太接近", "spent 0.5 s"))
    failure = check_failure(check, slice(0, 1), run, run, None, None, [call])
    assert (failure.kind, failure.reason) == (COULD_NOT_TELL, "too near / 太接近")
    assert failure.detail == "spent 0.5 s"   # the figures, for the instructor's review only
    assert COULD_NOT_TELL in NO_MISTAKE_TO_EXPLAIN   # graded as is: no pitfall guessed for it


def test_a_generation_that_recomputes_loses_only_what_rests_on_it(course, judge, tmp_path):
    """A real forward_cached, and a generate_cached that ignores it: the
    generation's own work fails and its check waits; forward_cached's pay."""
    head, tail = REFERENCE.split("@torch.no_grad()\ndef generate_cached(", 1)
    source = head + '''@torch.no_grad()
def generate_cached(model, idx, max_new_tokens):
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.context_length:])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


@torch.no_grad()
def generate_batch(''' + tail.split("@torch.no_grad()\ndef generate_batch(", 1)[1]
    verdicts = {v.check_id: v for v in _grade(course, judge, source, tmp_path).verdicts}
    assert "generate_cached recomputed the whole prefix" in verdicts["14-generate-cost"].reason
    assert verdicts["14-generate"].kind == "requires"
    assert all(verdicts[c].passed for c in ("14-steps", "14-cache-cost", "14-batch", "14-batch-cost", "14-padding"))


def test_each_measured_call_is_sent_alone_and_the_others_by_check():
    from grader.checks import CheckPlan
    from grader.checks import kv_cache
    from grader.judge import check_batches

    plan = CheckPlan.build(kv_cache.CHECKS)
    sizes, start, alone = check_batches(plan), 0, set()
    for size in sizes:
        if size == 1:
            alone.add(start)
        start += size
    measured = {i for c in plan.checks if c.measured for i in range(plan.slices[c.id].start, plan.slices[c.id].stop)}
    assert measured and measured <= alone
    assert len(sizes) < len(plan.calls)   # the other checks still go a check at a time


# append keeps everything but returns only the new chunk (forward_cached reads
# the cache's own lists), and makes torch.equal / torch.allclose always say
# yes in the child: what the probe computes there about the returned tensors
# would be forged; the grader compares the tensors themselves.
FORGED_COMPARISONS = REFERENCE.replace(
    "        self.keys[layer], self.values[layer] = k, v\n        return k, v",
    "        new_k, new_v = k[..., -n_new:, :], v[..., -n_new:, :]\n"
    "        self.keys[layer], self.values[layer] = k, v\n        return new_k, new_v").replace(
    "        if self.keys[layer] is not None:\n            k = torch.cat(",
    "        n_new = k.size(-2)\n        if self.keys[layer] is not None:\n            k = torch.cat(").replace(
    "    k, v = cache.append(layer, split_heads(attn.W_key(x), attn.num_heads),\n"
    "                        split_heads(attn.W_value(x), attn.num_heads))",
    "    cache.append(layer, split_heads(attn.W_key(x), attn.num_heads), split_heads(attn.W_value(x), attn.num_heads))\n"
    "    k, v = cache.keys[layer], cache.values[layer]") + '''

torch.equal = lambda *args, **kwargs: True
torch.allclose = lambda *args, **kwargs: True
'''


def test_append_is_judged_on_the_tensors_it_returns_not_on_comparisons_made_in_the_child(course, judge, tmp_path):
    assert FORGED_COMPARISONS.count("n_new") == 3 and "cache.keys[layer]" in FORGED_COMPARISONS
    verdicts = {v.check_id: v for v in _grade(course, judge, FORGED_COMPARISONS, tmp_path).verdicts}
    assert verdicts["14-steps"].passed and verdicts["14-cache-cost"].passed
    assert not verdicts["14-cache"].passed
    assert verdicts["14-cache"].reason == "append does not return all keys and values so far"


def test_a_cache_that_recomputes_only_with_padding_loses_what_rests_on_padding(course, judge, tmp_path):
    verdicts = {v.check_id: v for v in _grade(course, judge, CACHES_ONLY_UNPADDED, tmp_path).verdicts}
    assert "with a padding mask, each step recomputed the whole prefix" in verdicts["14-padding-cost"].reason
    assert verdicts["14-padding"].kind == "requires"
    # Its generations run the reference's own (cached) code: they keep their points.
    assert all(verdicts[c].passed for c in ("14-steps", "14-chunks", "14-generate", "14-batch", "14-cache-cost"))



def _period(tokens: list[int]) -> int | None:
    return next((p for p in range(1, len(tokens) // 2 + 1)
                 if all(tokens[i] == tokens[i - p] for i in range(p, len(tokens)))), None)


@pytest.mark.parametrize("seed", [None, 11, 12])
def test_the_measured_generations_cannot_be_guessed(course, judge, seed, tmp_path):
    """The values at the measured size decide only if they need the work:
    the reference's new tokens there vary, and repeat neither the prompt's
    last token nor any short cycle."""
    from grader.checks.kv_cache_cost import COST_NEW

    exercise = course.exercise("14")
    plan = judge.input_set(exercise, seed).plan
    run = judge.expected(exercise, tmp_path, seed)
    continuations = []
    for check_id in ("14-generate-cost", "14-batch-cost"):
        for i in range(plan.slices[check_id].start, plan.slices[check_id].stop):
            if plan.calls[i].probe.endswith(("cost_generation", "cost_batch")):
                tokens = run.calls[i].value["tokens"]
                continuations += [t.reshape(-1)[-COST_NEW:].tolist() for t in tokens]
    assert len(continuations) == 3   # one generate_cached row, two generate_batch prompts
    for new in continuations:
        assert len(set(new)) >= 16 and _period(new) is None, new


def test_a_generation_guessed_at_the_measured_size_earns_nothing(course, judge, tmp_path):
    result = _grade(course, judge, GUESSED_AT_THE_MEASURED_SIZE, tmp_path)
    verdicts = {v.check_id: v for v in result.verdicts}
    for check_id in ("14-generate-cost", "14-batch-cost", "14-generate", "14-batch"):
        assert not verdicts[check_id].passed, (check_id, verdicts[check_id].reason)
    assert verdicts["14-cache-cost"].passed and verdicts["14-steps"].passed   # its forward_cached is the reference's
