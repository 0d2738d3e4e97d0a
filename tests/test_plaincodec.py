"""The payload encoding between the grader and a sandboxed child
(grader/sandbox/plaincodec.py): plain values round-trip exactly, and bytes
from a hostile child decode to plain data or are refused, never anything else."""
import pickle
import random

import pytest
import torch

from grader.sandbox import wire
from grader.sandbox.plaincodec import DTYPES, CodecError, decode, encode

VALUES = [
    None, True, False, 0, -7, 2**100, 1.5, float("inf"), 1e-300, complex(1, -2), "", "héllo 注意力",
    [], (), {}, [1, (2.0, "x"), {"k": None}], {"dtype": torch.float16}, torch.float64,
    ["aten::exp", "aten::sum"], [""], ["", "", "注意力"], ["a\0b", "c"], ("aten::exp", "aten::sum"), ["a", 1],
    torch.tensor(3.0), torch.zeros(0, 5), torch.arange(12).reshape(3, 4).T,  # a non-contiguous view
    torch.tensor([True, False, True]), torch.randn(2, 3, dtype=torch.bfloat16),
    torch.randn(2, dtype=torch.complex64).conj(), torch.tensor([float("nan"), float("-inf")]),
    torch.randn(2, 3)._neg_view(), torch.randn(3, 2, dtype=torch.bfloat16).T, torch.randn(2, 2, requires_grad=True),
    torch.arange(24.0).reshape(2, 3, 4)[:, ::2, 1:],  # strided, with an offset
    *(torch.ones(2, 2, dtype=d) for d in DTYPES.values()),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_plain_values_round_trip_exactly(value):
    back = decode(encode(value))
    assert type(back) is type(value)
    if isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back.isnan(), value.isnan()) if value.is_floating_point() else True
        assert torch.equal(back.nan_to_num(), value.resolve_conj().nan_to_num())
    elif isinstance(value, float) or value != value:
        assert back == value or (back != back and value != value)
    else:
        assert back == value


def test_a_decoded_tensor_owns_its_memory():
    payload = bytearray(encode(torch.arange(4.0)))
    value = decode(bytes(payload))
    value += 1  # writable, and not a view of the payload
    assert torch.equal(value, torch.arange(4.0) + 1)


@pytest.mark.parametrize("value", [object(), torch.nn.Parameter(torch.ones(2)), {1: "int key"}, b"bytes",
                                   torch.ones(2).to_sparse(), set()])
def test_non_plain_values_are_refused_when_encoding(value):
    with pytest.raises(CodecError):
        encode(value)


def test_pickles_and_torch_save_bytes_are_refused(tmp_path):
    import io

    buf = io.BytesIO()
    torch.save({"x": torch.ones(2)}, buf)
    for payload in (buf.getvalue(), pickle.dumps([1, 2])):
        with pytest.raises(wire.ProtocolError, match="undecodable"):
            wire.loads(payload)


def test_truncated_and_mutated_payloads_decode_to_plain_data_or_are_refused():
    rng = random.Random(19)
    good = encode({"out": torch.randn(3, 4), "shape": (3, 4), "names": ["a", "b"], "n": 12, "d": torch.int64})
    for cut in range(len(good)):
        with pytest.raises(wire.ProtocolError):
            wire.loads(good[:cut])
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            value = wire.loads(bytes(data))
        except wire.ProtocolError:
            continue
        wire.validate(value)  # anything accepted is plain data


def test_a_tensor_claiming_more_bytes_than_sent_is_refused_before_allocating():
    header = encode(torch.ones(1))[:-4]  # tag, dtype, ndim=1, dim
    claim = bytearray(header)
    claim[-8:] = (1 << 40).to_bytes(8, "little")  # a terabyte-sized float32 vector
    with pytest.raises(CodecError, match="truncated"):
        decode(bytes(claim))


def test_a_list_of_str_travels_as_one_joined_text_and_a_forged_one_is_refused():
    assert encode(["aten::exp", "aten::sum"])[:1] == b"z"
    assert encode(["a\0b", "c"])[:1] == b"l"  # a str holding NUL: item by item
    assert encode([])[:1] == b"l"
    two = encode(["ab", "c"])  # z, count 2, length 4, "ab\0c"
    for forged in (two[:1] + (3).to_bytes(4, "little") + two[5:],  # a count that does not match
                   two[:1] + (0).to_bytes(4, "little") + (0).to_bytes(4, "little"),  # an empty one
                   two[:9] + b"\xff\xfe\0c"):  # not UTF-8
        with pytest.raises(CodecError):
            decode(forged)
    with pytest.raises(CodecError):
        decode(b"z" + (2**31).to_bytes(4, "little") + two[5:], max_items=1000)  # over the item budget


def _nest(depth: int, leaf: object) -> object:
    for i in range(depth):
        leaf = [leaf] if i % 3 else ({"k": leaf} if i % 2 else (leaf,))
    return leaf


def _codec_agrees_with_validate(value: object) -> None:
    """Encoding succeeds exactly when validate accepts, and what decodes validates."""
    try:
        wire.validate(value)
        valid = True
    except wire.ProtocolError:
        valid = False
    try:
        payload = encode(value)
    except CodecError:
        assert not valid, value
        return
    assert valid, value
    wire.validate(wire.loads(payload))


@pytest.mark.parametrize("leaf", [1, "x", None, torch.ones(2), ["a", "b"], []])
def test_the_codec_and_validate_draw_the_depth_line_at_the_same_place(leaf):
    """wire.loads trusts the decoder instead of walking the value again:
    both sides must refuse exactly what validate refuses."""
    for depth in range(wire.MAX_DEPTH - 2, wire.MAX_DEPTH + 3):
        _codec_agrees_with_validate(_nest(depth, leaf))


def test_whatever_decodes_is_what_validate_accepts_and_encoding_refuses_the_rest():
    """Random values at and around every limit: encoding succeeds exactly when
    validate accepts, and the decoded value always validates."""
    rng = random.Random(23)
    scalars = [None, True, 3, -2**70, 0.5, complex(1, 2), "s", "a\0b", torch.float32]
    tensors = [lambda: torch.randn(2, 3), lambda: torch.arange(6).reshape(2, 3).T, lambda: torch.zeros(0, 2),
               lambda: torch.ones(1).expand(2**27), lambda: torch.zeros(1).expand(2**40),
               lambda: torch.ones(2).as_subclass(torch.nn.Parameter), lambda: torch.eye(2).to_sparse()]

    def draw(depth: int) -> object:
        kind = rng.random()
        if depth > wire.MAX_DEPTH + 2 or kind < 0.35:
            return rng.choice(scalars)
        if kind < 0.45:
            return rng.choice(tensors)()
        items = [draw(depth + 1) for _ in range(rng.randint(0, 3))]
        if kind < 0.6:
            return items
        if kind < 0.7:
            return tuple(items)
        if kind < 0.75:
            return [rng.choice(["aten::exp", "", "注意"]) for _ in range(rng.randint(1, 3))]
        if kind < 0.8:
            return {1: items}
        return {f"k{i}": item for i, item in enumerate(items)}

    for _ in range(400):
        _codec_agrees_with_validate(_nest(rng.randint(0, wire.MAX_DEPTH + 1), draw(0)) if rng.random() < 0.3 else draw(0))


def test_an_expanded_view_claiming_terabytes_is_refused_before_it_is_materialised():
    with pytest.raises(CodecError, match="too large"):
        encode({"x": torch.zeros(1).expand(2**40)})
