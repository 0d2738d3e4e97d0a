"""Public tests for exercise 11. Run: pytest exercises/11_transformer
(the copy-task training test is in test_transformer_training.py)."""
import math

import pytest
import torch

from coursekit import expect
from coursekit.probes.modules import dtypes_after_to, gradient_reach, hidden_list_modules, train_eval_outputs
from coursekit.probes.placement import forward_placement
from coursekit.probes.transformer import (
    attention_weights, build, encode_decode, forward_logits, greedy_output, stack_inputs, structure,
)

@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: a second thread only adds overhead (a lot of it
    on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# src and tgt vocabularies differ so that swapped embeddings show up.
CONFIG = dict(src_vocab=13, tgt_vocab=11, d_model=16, num_heads=2, num_encoder_layers=2,
              num_decoder_layers=2, d_ff=32, dropout=0.1, max_len=50, pad_idx=0)


def tokens(seed: int, shape: tuple[int, ...], vocab: int, low: int = 1) -> torch.Tensor:
    """Random token ids in [low, vocab): no padding unless put in by hand."""
    return torch.randint(low, vocab, shape, generator=torch.Generator().manual_seed(seed))


def src_tgt(seed: int, b: int = 3, n_src: int = 7, n_tgt: int = 5, config: dict = CONFIG):
    return tokens(seed, (b, n_src), config["src_vocab"]), tokens(seed + 1, (b, n_tgt), config["tgt_vocab"])


def logits_of(student, config: dict, seed: int, src: torch.Tensor, tgt: torch.Tensor, **kwargs) -> torch.Tensor:
    """model(src, tgt) in eval mode, after checking that it is repeatable."""
    result = forward_logits(student, config, seed, src, tgt, **kwargs)
    expect.that(result["repeatable"], what="model(src, tgt) called twice in eval mode",
                expected="identical logits", actual="different logits: some dropout ignores .eval()"
                + (f" (modules in a plain list: {', '.join(result['hidden_lists'])})" if result["hidden_lists"] else ""),
                pitfalls=["plain-list-layers"] if result["hidden_lists"] else [])
    return result["logits"]


def test_sub_modules_are_registered(student):
    forward_logits(student, CONFIG, 0, *src_tgt(8))
    found = structure(student, CONFIG)
    expect.modules_registered(found["hidden_lists"], what="sub-modules of Transformer")
    children = {name: found["children"].get(name) for name in
                ("src_embed", "tgt_embed", "pos_encoding", "encoder", "decoder", "generator")}
    expect.equal(children, {"src_embed": "Embedding", "tgt_embed": "Embedding", "pos_encoding": "PositionalEncoding",
                            "encoder": "Encoder", "decoder": "Decoder", "generator": "Linear"},
                 what="types of the named sub-modules (None = missing)", pitfalls=["plain-list-layers"])
    expect.equal(found["n_parameters"], found["expected_n_parameters"],
                 what="number of parameters: two embeddings, Encoder, Decoder and generator of this config",
                 pitfalls=["plain-list-layers"])


@pytest.mark.parametrize("b,n_src,n_tgt", [(3, 7, 5), (1, 4, 9), (2, 6, 1)])
def test_forward_returns_one_logit_vector_per_target_position(student, b, n_src, n_tgt):
    src, tgt = src_tgt(b + n_src, b, n_src, n_tgt)
    result = forward_logits(student, CONFIG, 0, src, tgt)
    expect.shape(result["logits"], (b, n_tgt, CONFIG["tgt_vocab"]),
                 what=f"model(src {tuple(src.shape)}, tgt {tuple(tgt.shape)}): (batch, n_tgt, tgt_vocab)")
    expect.equal(result["logits"].dtype, torch.float32, what="dtype of the logits")
    expect.that(result["inputs_unchanged"], what="src and tgt after the call",
                expected="unchanged", actual="modified in place")


def test_encode_and_decode_compose_into_forward(student):
    src, tgt = src_tgt(1)
    result = encode_decode(student, CONFIG, 0, src, tgt)
    d = CONFIG["d_model"]
    expect.shape(result["memory"], (3, 7, d), what="encode(src): memory (batch, n_src, d_model)")
    expect.shape(result["decoded"], (3, 5, d), what="decode(tgt, memory, src): (batch, n_tgt, d_model), before the generator")
    expect.equal(result["generator_type"], "Linear", what="type of model.generator")
    logits = result["logits"]
    looks_like_probabilities = bool((logits >= 0).all()) and bool((logits <= 1).all())
    expect.close(logits, result["generated"], what="model(src, tgt) == generator(decode(tgt, encode(src), src))",
                 pitfalls=["softmax-before-loss"] if looks_like_probabilities else [])


def test_returns_logits_not_probabilities(student):
    src, tgt = src_tgt(2)
    result = forward_logits(student, CONFIG, 0, src, tgt)
    logits = result["logits"]
    sums_to_one = {dim: bool(torch.allclose(logits.sum(dim), torch.ones(()), atol=1e-4)) for dim in (0, -1)}
    pitfalls = ["softmax-before-loss"]
    if result["implicit_softmax"] or sums_to_one[0]:
        pitfalls.append("softmax-implicit-dim")
    expect.that(
        bool((logits < 0).any()) and not any(sums_to_one.values()),
        what="model(src, tgt) returns logits (any real numbers), not probabilities",
        expected="some negative values, rows not summing to one",
        actual=f"min {logits.min().item():.3g}, rows sum to one along dim -1: {sums_to_one[-1]}, along dim 0: {sums_to_one[0]}",
        pitfalls=pitfalls,
    )


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_embeddings_are_scaled_and_get_the_positional_encoding_once(student, side):
    src, tgt = src_tgt(3, b=2, n_src=6, n_tgt=4)
    result = stack_inputs(student, CONFIG, 0, src, tgt)
    ids, table = (src, result["src_embed"]) if side == "encoder" else (tgt, result["tgt_embed"])
    got = result[f"{side}_input"]
    expect.that(got is not None, what=f"the {side}'s input during model(src, tgt)",
                expected=f"model.{side}(x, ...), or its first layer model.{side}.layers[0], called with x (batch, n, d_model)",
                actual=f"neither model.{side} (a {result[side + '_type']}) nor its first layer ran",
                pitfalls=["plain-list-layers"] if result[side + "_type"] in ("list", "tuple") else [])
    embedded, pe = table[ids], result["pe"][0, : ids.size(1)]
    expect.shape(got, tuple(embedded.shape), what=f"the {side}'s input x: (batch, n, d_model)")
    # The paper's formula, and the two ways it often goes wrong.
    scale = math.sqrt(CONFIG["d_model"])
    pitfalls = []
    if torch.allclose(got, 2 * embedded * scale + pe, atol=1e-4) or torch.allclose(got, 2 * embedded + pe, atol=1e-4):
        pitfalls = ["pe-added-twice"]
    if torch.allclose(got, embedded + pe, atol=1e-4):
        pitfalls = ["embed-not-scaled"]
    expect.close(got, embedded * scale + pe, atol=1e-4,
                 what=f"input of model.{side} (eval mode): {'src' if side == 'encoder' else 'tgt'}_embed(ids) * sqrt(d_model) + PE[:n]",
                 pitfalls=pitfalls)


def test_padded_sources_give_the_same_logits_as_unpadded_ones(student):
    # Each source has its own length; the batch is right-padded with pad_idx = 0,
    # with one column of padding more than needed.
    lengths = [5, 3, 1, 4]
    src = torch.zeros(4, 6, dtype=torch.long)
    for row, n in enumerate(lengths):
        src[row, :n] = tokens(10 + row, (n,), CONFIG["src_vocab"])
    tgt = tokens(20, (4, 5), CONFIG["tgt_vocab"])
    batched = logits_of(student, CONFIG, 0, src, tgt)
    for row, n in enumerate(lengths):
        alone = logits_of(student, CONFIG, 0, src[row:row + 1, :n], tgt[row:row + 1])
        expect.close(batched[row:row + 1], alone, atol=1e-5,
                     what=f"logits of source {row} ({n} tokens + {6 - n} pad) in a padded batch vs the same source alone, unpadded: "
                          "padded keys must be blocked in the encoder's self-attention and in the decoder's cross-attention")


def test_what_the_pad_embedding_holds_does_not_matter(student):
    config = {**CONFIG, "pad_idx": 3}  # not 0: use self.pad_idx, not a hard-coded 0
    src = torch.tensor([[5, 6, 7, 8, 3, 3], [9, 10, 3, 3, 3, 3]])
    tgt = torch.tensor([[1, 4, 5, 6, 3], [1, 7, 3, 3, 3]])
    real = tgt != 3
    before = logits_of(student, config, 0, src, tgt)
    other_pad = torch.randn(config["d_model"], generator=torch.Generator().manual_seed(5)) * 10
    after = logits_of(student, config, 0, src, tgt, pad_embedding=other_pad)
    expect.close(after[real], before[real], atol=1e-4,
                 what="logits at the non-pad target positions after changing the embedding of pad_idx (= 3 here): "
                      "padding must be masked wherever it is used as a key")


def test_the_decoder_is_causal(student):
    src, tgt = src_tgt(4, b=2, n_tgt=6)
    changed = tgt.clone()
    changed[:, 3] = tgt[:, 3] % (CONFIG["tgt_vocab"] - 1) + 1  # another token, never pad_idx = 0
    before = logits_of(student, CONFIG, 0, src, tgt)
    after = logits_of(student, CONFIG, 0, src, changed)
    expect.close(after[:, :3], before[:, :3],
                 what="logits at target positions 0-2 after changing the target token at position 3: "
                      "a position must not see the future (causal mask inside the model)")
    expect.that(not torch.allclose(after[:, 3], before[:, 3]), what="logits at position 3 after changing the token there",
                expected="different (the token itself is visible)", actual="unchanged")


def test_attention_weights_follow_the_masks(student):
    # Right-padded sources and targets (pad_idx = 0); the first layers' weights.
    src = torch.tensor([[4, 5, 6, 7, 8], [9, 10, 0, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])
    found = attention_weights(student, CONFIG, 0, src, tgt)
    for name, weights in found.items():
        expect.that(weights is not None, what=f"attention weights kept by the first {name.replace('_', ' ')} layer (.attn)",
                    expected="a tensor (batch, heads, n_q, n_k) after model(src, tgt)", actual="None")
    src_pad = (src == 0)[:, None, None, :]  # (b, 1, 1, n_src): broadcasts over heads and queries
    for name in ("encoder_self", "decoder_cross"):
        blocked = found[name].masked_select(src_pad.expand_as(found[name]))
        allowed = found[name].masked_select(~src_pad.expand_as(found[name]))
        expect.close(blocked, torch.zeros_like(blocked),
                     what=f"{name.replace('_', ' ')}-attention weights on padded source positions (src_mask)",
                     pitfalls=["mask-inverted"] if bool((allowed == 0).all()) else [])
    weights = found["decoder_self"][:, :, :2]  # the queries of the real tokens of both rows
    future = torch.triu(torch.ones(2, 4, dtype=torch.bool), diagonal=1)  # query i may see keys 0..i
    diagonal = torch.diagonal(weights, dim1=-2, dim2=-1)  # (b, h, 2): query i on key i
    if bool((weights.masked_select(~future.expand_as(weights)) == 0).all()):
        pitfalls = ["mask-inverted"]  # only the future is visible
    elif bool((diagonal == 0).all()):
        pitfalls = ["mask-off-by-one"]  # the past is visible, but not the token itself
    else:
        pitfalls = []
    expect.close(weights.masked_select(future.expand_as(weights)), torch.zeros(weights.shape[:2].numel() * int(future.sum())),
                 what="decoder self-attention weights on future target positions (tgt_mask)", pitfalls=pitfalls)
    expect.close(weights.sum(-1), torch.ones(weights.shape[:-1]),
                 what="sum of each real target token's decoder self-attention weights (it sees itself and the past)",
                 pitfalls=pitfalls)


def test_masks_are_built_on_the_inputs_device(student):
    src, tgt = src_tgt(5)
    # On the CPU first (an error there is no device problem), then
    # model.to('meta') on inputs moved to 'meta', a device that stands in for a GPU.
    result = forward_placement(student, "Transformer", CONFIG, [src, tgt])
    hidden = hidden_list_modules(build(student, CONFIG, 0))  # .to() cannot move layers it does not see
    expect.that(
        result["placement"] != "mismatch",
        what="model.to('meta')(src, tgt) with the inputs on 'meta' too (a device that stands in for a GPU here)",
        expected="it runs: every mask and index tensor created on src.device / tgt.device",
        actual=result["detail"],
        pitfalls=["plain-list-layers"] if hidden else ["mask-cpu-loop"],
    )
    expect.equal(result["shape"], [3, 5, CONFIG["tgt_vocab"]], what="shape of the logits in this check")


GREEDY = dict(src_vocab=7, tgt_vocab=5, d_model=16, num_heads=2, num_encoder_layers=1,
              num_decoder_layers=1, d_ff=32, dropout=0.1, max_len=50, pad_idx=0)
START, END = 1, 2


def test_greedy_decode_returns_max_len_tokens_starting_with_the_start_symbol(student):
    src = tokens(6, (4, 5), GREEDY["src_vocab"])
    result = greedy_output(student, GREEDY, 0, src, 9, START, END)
    expect.shape(result["tokens"], (4, 9), what="greedy_decode(src (4, 5), max_len=9, ...): (batch, max_len)")
    expect.equal(result["tokens"].dtype, torch.long, what="dtype of greedy_decode's output")
    expect.equal(result["tokens"][:, 0].tolist(), [START] * 4, what="column 0 of greedy_decode's output (start_symbol)")


GREEDY_SEED = 6  # with these weights rows end at different steps, one never does


def test_greedy_decode_takes_the_argmax_and_pads_after_the_end_symbol(student):
    src = tokens(7, (6, 5), GREEDY["src_vocab"])
    src[4, 3:] = 0  # a padded source
    max_len = 10
    result = greedy_output(student, GREEDY, GREEDY_SEED, src, max_len, START, END)
    out, argmax = result["tokens"], result["step_argmax"]
    expect.shape(out, (6, max_len), what="greedy_decode(src (6, 5), max_len=10, ...)")
    pitfalls = ["softmax-implicit-dim"] if result["implicit_softmax"] else []
    for row in range(out.size(0)):
        ended = False
        for t in range(1, max_len):
            expected = GREEDY["pad_idx"] if ended else int(argmax[row, t - 1])
            why = ("pad_idx: the row already produced end_symbol" if ended else
                   f"argmax of model(src, tokens[:, :{t}]) at its last position")
            expect.equal(int(out[row, t]), expected, what=f"greedy_decode token [{row}, {t}] ({why}); row: {out[row].tolist()}",
                         pitfalls=pitfalls)
            ended = ended or int(out[row, t]) == END


def test_gradients_reach_every_parameter(student):
    src, tgt = src_tgt(9)
    model = build(student, CONFIG, 0).train()
    upstream = torch.randn(3, 5, CONFIG["tgt_vocab"], generator=torch.Generator().manual_seed(9))
    reach = gradient_reach(model, lambda m: m(src, tgt) * upstream)
    expect.gradients_reach_all(reach, what="gradients of every parameter after backward() through model(src, tgt)")


def test_dropout_only_in_training_mode(student):
    src, tgt = src_tgt(10)
    model = build(student, {**CONFIG, "dropout": 0.5}, 0)
    outs = train_eval_outputs(model, lambda m: m(src, tgt))
    expect.that(not torch.equal(outs["train_0"], outs["train_1"]), what="two forward passes in train mode, dropout=0.5",
                expected="different outputs", actual="identical: dropout is not applied")
    expect.close(outs["eval_1"], outs["eval_0"], what="two forward passes in eval mode")


def test_to_float64_moves_everything(student):
    src, tgt = src_tgt(11)
    model = build(student, CONFIG, 0)
    dtypes = dtypes_after_to(model, torch.float64)
    not_moved = sorted(name for name, dtype in dtypes.items() if dtype == "torch.float32")
    expect.that(not not_moved, what="dtypes after model.to(torch.float64)", expected="every floating tensor float64",
                actual="still float32: " + ", ".join(not_moved))
    hidden = structure(student, CONFIG)["hidden_lists"]
    try:
        with torch.no_grad():
            dtype = model(src, tgt).dtype
    except RuntimeError as exc:
        dtype = f"an error: {exc}"
    expect.equal(dtype, torch.float64, what="dtype of the logits after model.to(torch.float64)",
                 pitfalls=["plain-list-layers"] if hidden else [])


def test_uses_no_builtin_transformer(student):
    build(student, CONFIG, 0)  # a stub has nothing to inspect yet
    expect.no_forbidden_calls(student, advice="build it from Encoder, Decoder and PositionalEncoding")
