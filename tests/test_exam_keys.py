"""Every question of the bank: its key is right, its distractors are wrong,
and the phrasings students write for short answers are graded as they should.

Choice keys are checked against a table written here, independently of
exams/questions.yaml (the notes' comparison table for the complexity
questions), and, where a claim can be computed, against PyTorch. Numeric
keys, computed by running the references, are checked against closed forms.
Short answers are graded through the grader's own matching with the
phrasings a class would write, right and wrong.
"""
from __future__ import annotations

import math

import pytest
import torch

from grader.course import REPO_ROOT
from grader.exams.answers import grade_one
from grader.exams.questions import answer_keys, show
from grader.exams.variants import make_variant

SECRET = b"test-secret-for-the-answer-keys-0123"
STUDENTS = ("k01", "k02", "k03", "k04")

# The comparison table of notes/02_sequence_models.md §1 (n tokens, width d,
# kernel k, ordinary convolutions): what the complexity questions rest on.
TABLE = {
    ("self-attention", "complexity"): "O(n² d)", ("rnn", "complexity"): "O(n d²)",
    ("cnn", "complexity"): "O(k n d²)",
    ("self-attention", "parallel"): "O(n)", ("rnn", "parallel"): "O(1)", ("cnn", "parallel"): "O(n)",
    ("self-attention", "path"): "O(1)", ("rnn", "path"): "O(n)", ("cnn", "path"): "O(n/k)",
}

# The right choice of every choice question, by (part of) its English text.
RIGHT_CHOICE = {
    "table-complexity-self-attention": TABLE["self-attention", "complexity"],
    "table-complexity-rnn": TABLE["rnn", "complexity"],
    "table-parallelism-rnn": TABLE["rnn", "parallel"],
    "table-path-rnn": TABLE["rnn", "path"],
    "table-path-self-attention": TABLE["self-attention", "path"],
    "table-path-cnn": TABLE["cnn", "path"],
    "self-attention-long-sequences": "Every token reaches every other in one step",
    "positional-encoding-why": "treats its inputs as a set",
    "pe-sine-columns": "the even columns",
    "pe-relative-shift": "only on δ",
    "sqrt-dk-why": "variance about d_k",
    "qkv-compared-with-query": "every key",
    "softmax-stable": "subtracts the row's maximum",
    "mask-convention": "attention is blocked there",
    "mask-before-softmax": "Zeroed without renormalising",
    "causal-mask-why": "Position i sees the tokens it must predict",
    "fully-blocked-row": "all-zero weights and a zero output",
    "dropout-eval": "nothing: it returns the input unchanged",
    "post-norm": "LayerNorm(x + Dropout(sublayer(x)))",
    "cross-attention-sources": "queries from the decoder; keys and values from the encoder",
    "seq2seq-bottleneck": "one fixed-size vector",
    "heads-why": "its own subspace",
    "attention-at-init": "Close to uniform",
    "cnn-as-attention": "With k heads",
    "prenorm-block": "x + Dropout(sublayer(LayerNorm(x)))",
    "prenorm-final-norm": "No block normalises the residual stream",
    # Part D: RoPE (notes/06_rope.md; the padding claim is proved in tests/test_checks_rope.py)
    "rope-rotated-tensors": "The queries and the keys only",
    "rope-padding-row-start": "Nothing changes",
    "rope-pairing-conversion": "Permute the rows of W_query and W_key",
    "rope-cache-contents": "Its key rotated at its own position",
    "sliding-visible-keys": "7 to 10 (four keys)",
    "sliding-cache-exact": "no layer ever looks further back than the window",
    # Part D: tiled attention (notes/05_flash_attention.md)
    "flash-attention-rescale": "both are multiplied by exp(m - m_new)",
    "flash-attention-backward-saves": "the log-sum-exp of each query's scores",
    # Part D: grouped-query attention (notes/07_gqa.md)
    "gqa-what-shrinks": "The number of attention scores each query head computes",
    "gqa-repeat-order": "A, A, B, B",
}

# Short answers: phrasings that must score (at least five each, in both
# languages where students may answer in Chinese) and wrong ones that must not.
SHORT = {
    "qkv-output-values": (
        ["values", "Values", "the values", "value", "V", "v.", "value vector", "the value vectors", "Value Vectors",
         "values (V)", "值", "值向量", "ＶＡＬＵＥＳ", " values。", "\"values\""],
        ["keys", "queries", "the keys", "key vectors", "weights", "attention weights", "query", "k", "q", "键", "查询"],
    ),
    "cross-attention-kv-source": (
        ["encoder", "the encoder", "Encoder.", "encoder output", "the encoder output", "encoder's output",
         "the encoder's output", "encoder outputs", "output of the encoder", "the memory", "memory",
         "编码器", "编码器输出", "编码器的输出", "encoder的输出", "Ｅｎｃｏｄｅｒ"],
        ["decoder", "the decoder", "decoder output", "解码器", "解码器的输出", "embedding", "the input", "query"],
    ),
    "mask-fill-value": (
        ["-inf", "−inf", "–inf", "－ｉｎｆ", "-infinity", "-Infinity", "float('-inf')", "float(\"-inf\")",
         "float(“-inf”)", "-float('inf')", "-math.inf", "-torch.inf", "-np.inf", "minus infinity",
         "Negative Infinity", "negative infinity.", "-∞", "−∞", "负无穷", "负无穷大", "`-inf`"],
        ["inf", "+inf", "infinity", "0", "-1e9", "-1e-9", "1e9", "torch.finfo(torch.float32).min", "nan", "正无穷",
         "-1"],
    ),
}


@pytest.fixture(scope="module")
def everything(course):
    """An exam with every question of the bank, on the midterm's sizes."""
    midterm = course.exam("midterm")
    return midterm.model_copy(update={"questions": list(course.questions), "id": "everything"})


@pytest.fixture(scope="module")
def drawn(course, everything):
    return [make_variant(course, everything, student, SECRET) for student in STUDENTS]


@pytest.fixture(scope="module")
def keys(course, everything, drawn):
    """Every student's keys: the numeric ones computed by the references."""
    return answer_keys(course, everything, drawn, REPO_ROOT)


def _grade(course, variant, keys, question_id: str, raw: object):
    shown = show(course.question(question_id), variant, 1)
    return grade_one(shown, keys[variant.student][question_id], raw)


def test_every_choice_and_short_question_is_covered_here(course):
    kinds = {qid: q.kind for qid, q in course.questions.items()}
    assert {qid for qid, kind in kinds.items() if kind == "choice"} == set(RIGHT_CHOICE)
    assert {qid for qid, kind in kinds.items() if kind == "short"} == set(SHORT)


@pytest.mark.parametrize("question_id", sorted(RIGHT_CHOICE))
def test_the_key_is_the_right_choice_and_every_other_choice_scores_zero(course, drawn, keys, question_id):
    question = course.question(question_id)
    english = [c.text if isinstance(c.text, str) else c.text.en for c in question.choices]
    right = [i for i, text in enumerate(english) if RIGHT_CHOICE[question_id] in text]
    assert len(right) == 1, f"{question_id}: {RIGHT_CHOICE[question_id]!r} should name exactly one choice"
    assert [i for i, c in enumerate(question.choices) if c.correct] == right
    assert len(set(english)) == len(english), f"{question_id}: two choices read the same"
    for variant in drawn:
        shown = show(question, variant, 1)
        for choice in shown.choices:
            verdict = _grade(course, variant, keys, question_id, choice.letter)
            assert verdict.correct == (choice.original in right), (question_id, choice.en)


def test_the_complexity_questions_offer_the_other_rows_as_distractors(course):
    """The distractors of a table question are other cells of the table, or
    forms that no cell holds; never the right cell of the asked row."""
    for question_id, cell in RIGHT_CHOICE.items():
        if question_id.startswith("table-"):
            texts = [c.text for c in course.question(question_id).choices]
            assert texts.count(cell) == 1


def _masked_weights(scores: torch.Tensor, blocked: torch.Tensor) -> dict[str, torch.Tensor]:
    before = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    zeroed = torch.softmax(scores, dim=-1).masked_fill(blocked, 0.0)
    return {"before": before, "zeroed": zeroed, "renormalised": zeroed / zeroed.sum(-1, keepdim=True)}


def test_mask_before_softmax_claims_hold():
    """The key: zeroing without renormalising leaves rows that do not sum to
    one and still depend on the blocked scores. The distractors: the weights
    differ from masking first; renormalised, they are exactly the same."""
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    blocked = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    found = _masked_weights(scores, blocked)
    assert not torch.allclose(found["zeroed"].sum(-1)[:-1], torch.ones(5, dtype=torch.float64))
    assert not torch.allclose(found["zeroed"], found["before"])
    torch.testing.assert_close(found["renormalised"], found["before"])
    future_changed = scores.clone()
    future_changed[0, 5] += 3.0  # a blocked (future) score of query 0
    again = _masked_weights(future_changed, blocked)
    assert again["zeroed"][0, 0] != found["zeroed"][0, 0]          # it leaks
    assert torch.equal(again["before"][0], found["before"][0])      # it does not


def test_sqrt_dk_and_dropout_claims_hold():
    gen = torch.Generator().manual_seed(1)
    for d_k in (4, 64):
        q, k = torch.randn(20000, d_k, generator=gen), torch.randn(20000, d_k, generator=gen)
        assert (q * k).sum(-1).var().item() == pytest.approx(d_k, rel=0.05)
    x = torch.randn(3, 5, generator=gen)
    dropout = torch.nn.Dropout(0.5).eval()
    assert torch.equal(dropout(x), x)


def test_attention_at_initialisation_is_nearly_uniform():
    """attention-at-init, and notes/01_attention.md §6: with PyTorch's default
    nn.Linear init and unit-variance inputs, most weights stay within a
    factor 2 of 1/n; without the 1/sqrt(d_k) factor they would not."""
    torch.manual_seed(0)
    n, d = 10, 64
    x = torch.randn(200, n, d)
    w_q, w_k = torch.nn.Linear(d, d, bias=False), torch.nn.Linear(d, d, bias=False)
    with torch.no_grad():
        scores = w_q(x) @ w_k(x).transpose(-2, -1)
        scaled = torch.softmax(scores / d ** 0.5, dim=-1) * n
        unscaled = torch.softmax(scores, dim=-1) * n
    within = lambda w: ((w > 0.5) & (w < 2)).float().mean().item()  # noqa: E731
    assert within(scaled) > 0.9 and within(unscaled) < 0.5


def test_numeric_keys_match_closed_forms(course, drawn, keys):
    for variant in drawn:
        s, k = variant.env(), keys[variant.student]
        d, h, hd, n = s["d_model"], s["heads"], s["head_dim"], s["seq_len"]
        p = variant.params
        expected = {
            "score-variance": hd,
            "head-scale": math.sqrt(d / h),
            "causal-blocked-count": n * (n - 1) // 2,
            "attention-output-shape": (s["batch"], n, d),
            "mha-parameters": 3 * d * d + d * d + d,
            "wrapper-parameters": h * 3 * d * hd,
            "split-heads-shape": (s["batch"], h, n, d // h),
            "dropout-train-scale": 1 / (1 - p["dropout-train-scale"]["p"]),
            "embedding-parameters": p["embedding-parameters"]["vocab"] * d,
            "encoder-layer-parameters": (4 * d * d + 4 * d) + (2 * 4 * d * d + 4 * d + d) + 2 * 2 * d,
        }
        query, key = p["causal-weight"]["query"], p["causal-weight"]["key"]
        expected["causal-weight"] = 0.0 if key > query else 1 / (query + 1)
        # Part C: tying shares the vocab x d_model matrix; each block caches one key and one value of
        # d_model numbers per token; sampling is the softmax of logits / T.
        expected["tied-weights-saved"] = p["tied-weights-saved"]["vocab"] * d
        kv = p["kv-cache-bytes-per-token"]
        expected["kv-cache-bytes-per-token"] = 2 * kv["num_layers"] * d * kv["value_bytes"]
        t, gap = p["temperature-probability"]["temperature"], p["temperature-probability"]["gap"]
        expected["temperature-probability"] = math.exp(gap / t) / (math.exp(gap / t) + math.exp(1 / t) + 1)
        # Part D (18): L (W - 1) + 1 positions; min(tokens, window) positions of keys and values per
        # layer; position p in slot p % window.
        rf = p["sliding-receptive-field"]
        expected["sliding-receptive-field"] = rf["num_layers"] * (rf["window"] - 1) + 1
        rc = p["sliding-rolling-cache-bytes"]
        expected["sliding-rolling-cache-bytes"] = (2 * rc["num_layers"] * d * min(rc["tokens"], rc["window"])
                                                   * rc["value_bytes"])
        expected["sliding-ring-slot"] = p["sliding-ring-slot"]["position"] % p["sliding-ring-slot"]["window"]
        # Part D (15): the n x n matrix of every head; the key blocks each causal query block visits
        # (bottom-right diagonal): ceil(min(n_k, q_end + n_k - n_q) / B), summed over the query blocks.
        fm = p["flash-attention-matrix-bytes"]
        expected["flash-attention-matrix-bytes"] = fm["n"] * fm["n"] * fm["heads"] * fm["value_bytes"]
        fb = p["flash-attention-causal-blocks"]
        n_q, block = fb["n_q"], fb["block_size"]
        n_k = n_q + fb["extra_keys"]
        expected["flash-attention-causal-blocks"] = sum(
            math.ceil(min(n_k, min(n_q, start + block) + n_k - n_q) / block) for start in range(0, n_q, block))
        # Part D (17): 2 L g hd bytes; q/g times smaller; query head m reads m // (q / g); parameters
        # W_query d x d, W_key and W_value d x (g hd) each, out_proj d x d + d.
        gb = p["gqa-cache-bytes-per-token"]
        expected["gqa-cache-bytes-per-token"] = 2 * gb["num_layers"] * gb["kv_heads"] * gb["hd"] * gb["value_bytes"]
        gs = p["gqa-cache-saving"]
        expected["gqa-cache-saving"] = gs["q_heads"] / gs["kv_heads"]
        gh = p["gqa-kv-head-of-query"]
        expected["gqa-kv-head-of-query"] = gh["m"] // (gh["q_heads"] // gh["kv_heads"])
        gp = p["gqa-parameters"]
        dq = gp["q_heads"] * gp["hd"]
        expected["gqa-parameters"] = dq * dq + 2 * dq * gp["kv_heads"] * gp["hd"] + dq * dq + dq
        position, column = p["pe-value"]["position"], p["pe-value"]["column"]
        angle = position / 10000 ** ((column - column % 2) / d)
        expected["pe-value"] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
        # Part D: RoPE turns q = (2, 1) by i radians and k = (1, c) by j: their dot product; pair k's
        # wavelength is 2π base^(2k / head_dim).
        rope, c = p["rope-score-shift"], p["rope-score-shift"]["key_second"]
        turn = lambda v, a: (v[0] * math.cos(a) - v[1] * math.sin(a), v[0] * math.sin(a) + v[1] * math.cos(a))  # noqa: E731
        q_i, k_j = turn((2.0, 1.0), rope["query_position"]), turn((1.0, c), rope["key_position"])
        expected["rope-score-shift"] = q_i[0] * k_j[0] + q_i[1] * k_j[1]
        wave = p["rope-wavelength"]
        expected["rope-wavelength"] = 2 * math.pi * wave["rope_base"] ** (2 * wave["pair"] / wave["rope_head_dim"])
        numeric = {qid for qid, q in course.questions.items() if q.kind == "numeric"}
        assert numeric == set(expected), "a numeric question without a closed form here"
        for question_id, value in expected.items():
            got = k[question_id].value
            assert got == pytest.approx(value, abs=1e-6), (question_id, variant.student)
            right = list(value) if isinstance(value, tuple) else value
            assert _grade(course, variant, keys, question_id, right).correct
            wrong = [v + 1 for v in value] if isinstance(value, tuple) else value * 1.5 + 1
            assert not _grade(course, variant, keys, question_id, wrong).correct, question_id


@pytest.mark.parametrize("question_id", sorted(SHORT))
def test_short_answers_accept_what_students_write(course, drawn, keys, question_id):
    right, wrong = SHORT[question_id]
    assert len(right) >= 5
    variant = drawn[0]
    rejected = [raw for raw in right if not _grade(course, variant, keys, question_id, raw).correct]
    accepted = [raw for raw in wrong if _grade(course, variant, keys, question_id, raw).correct]
    assert rejected == [], f"{question_id}: right answers rejected"
    assert accepted == [], f"{question_id}: wrong answers accepted"
