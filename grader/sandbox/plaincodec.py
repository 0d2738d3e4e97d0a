"""A small binary encoding of plain data: what travels in a frame's payload.

It replaced ``torch.save``/``torch.load(weights_only=True)``, which cost
~60% of a sandboxed run's time (a zip archive and a restricted unpickler per
probe call, ~1 ms each even for a 4-element tensor). This format has no
code paths beyond the plain types themselves: nothing to unpickle, no
globals, no storages shared between values.

A value is a one-byte tag and its body, little-endian:

    N None   T True   F False
    i int    (u32 length, decimal ASCII: ints of any size)
    f float  (f64)            c complex (two f64)
    s str    (u32 length, UTF-8)
    l list / t tuple (u32 count, items)
    z list of str (u32 count, u32 length, the UTF-8 of the strs joined
             by NUL: none holds one; recorded operator names are most of
             a result, and one split decodes them all)
    d dict   (u32 count, then str key and value pairs)
    y dtype  (u8 length, the name after "torch.")
    x tensor (dtype as for y, u8 ndim, u64 per dim, then the raw bytes of
              the contiguous tensor: their length is implied by the shape)

Decoding checks every length against what is left, the depth, the item
count and the dtype names, and raises :class:`CodecError` for anything else.
What it returns is plain data within the limits ``wire.validate`` checks
(exact types, depth, items; tensors dense, on the CPU, no larger than the
payload), so ``wire.loads`` does not walk the value a second time; encoding
refuses the same things up front (a tensor larger than
:data:`MAX_TENSOR_BYTES` before it is made contiguous).
"""
from __future__ import annotations

import struct
from typing import Any

import torch

_U8, _U32, _U64, _F64 = struct.Struct("<B"), struct.Struct("<I"), struct.Struct("<Q"), struct.Struct("<d")
_C128 = struct.Struct("<dd")
MAX_DEPTH = 32
MAX_TENSOR_BYTES = 64 * 1024 * 1024  # = wire.MAX_FRAME: a larger tensor could not travel in a frame anyway
MAX_DIMS = 32
MAX_INT_DIGITS = 5000  # Python's own default limit for int('...') (sys.int_info.default_max_str_digits)

# Every dtype a result may hold, by its name after "torch." (a closed list:
# the decoder never calls getattr(torch, <a name from the child>)).
DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex128, torch.complex64,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
}
_NAMES = {d: n.encode() for n, d in DTYPES.items()}


# The types validate and the depth rule treat as scalars (wire uses this set too).
SCALAR_TYPES = frozenset((type(None), bool, int, float, complex, str))


class CodecError(ValueError):
    """Bytes that are not an encoding of plain data."""


def encode(value: Any) -> bytes:
    """The bytes of a plain value (see the module's docstring); CodecError
    for anything else."""
    out: list[bytes] = []
    _encode(value, out, 0)
    return b"".join(out)


def encode_list(encoded_items: list[bytes]) -> bytes:
    """The bytes of a list whose items are given already encoded (the
    grader encodes each probe call once and sends them in batches)."""
    return b"".join([b"l", _U32.pack(len(encoded_items)), *encoded_items])


def _encode(v: Any, out: list[bytes], depth: int) -> None:
    t = type(v)
    if depth > MAX_DEPTH and t not in SCALAR_TYPES:  # as validate counts: a scalar may sit one deeper
        raise CodecError(f"nested deeper than {MAX_DEPTH}")
    if v is None:
        out.append(b"N")
    elif t is bool:
        out.append(b"T" if v else b"F")
    elif t is int:
        digits = str(v).encode()
        out += [b"i", _U32.pack(len(digits)), digits]
    elif t is float:
        out += [b"f", _F64.pack(v)]
    elif t is complex:
        out += [b"c", _C128.pack(v.real, v.imag)]
    elif t is str:
        data = v.encode("utf-8", "surrogatepass")
        out += [b"s", _U32.pack(len(data)), data]
    elif t is list and v and all(type(item) is str for item in v) and _without_nul(joined := "\0".join(v), len(v)):
        data = joined.encode("utf-8", "surrogatepass")
        out += [b"z", _U32.pack(len(v)), _U32.pack(len(data)), data]
    elif t is list or t is tuple:
        out += [b"l" if t is list else b"t", _U32.pack(len(v))]
        for item in v:
            if type(item) is str:  # inline: lists of names are most of what a recorded call returns
                data = item.encode("utf-8", "surrogatepass")
                out += [b"s", _U32.pack(len(data)), data]
            else:
                _encode(item, out, depth + 1)
    elif t is dict:
        out += [b"d", _U32.pack(len(v))]
        for key, item in v.items():
            if type(key) is not str:
                raise CodecError(f"dict key of type {type(key).__name__}, not str")
            _encode(key, out, depth + 1)
            _encode(item, out, depth + 1)
    elif t is torch.dtype:
        out += [b"y", *_dtype_bytes(v)]
    elif t is torch.Tensor:
        _encode_tensor(v, out)
    elif isinstance(v, torch.Tensor):
        raise CodecError(f"a {t.__name__} (a torch.Tensor subclass); only plain tensors may come back")
    else:
        raise CodecError(f"a {t.__module__}.{t.__qualname__} is not plain data")


def _without_nul(joined: str, count: int) -> bool:
    """No str of the ``count`` joined by NUL holds one itself."""
    return joined.count("\0") == count - 1


def _dtype_bytes(dtype: torch.dtype) -> list[bytes]:
    name = _NAMES.get(dtype)
    if name is None:
        raise CodecError(f"tensors of {dtype} cannot be sent")
    return [_U8.pack(len(name)), name]


def _encode_tensor(v: torch.Tensor, out: list[bytes]) -> None:
    if v.layout is not torch.strided or v.device.type != "cpu" or v.is_quantized:
        raise CodecError(f"only dense CPU tensors can be sent ({v.layout}, {v.device})")
    if v.dim() > MAX_DIMS:
        raise CodecError(f"a tensor of {v.dim()} dimensions")
    if v.numel() * v.element_size() > MAX_TENSOR_BYTES:  # an expanded view can claim terabytes over a tiny storage
        raise CodecError(f"a tensor of shape {tuple(v.shape)} is too large")
    out += [b"x", *_dtype_bytes(v.dtype), _U8.pack(v.dim()), *(_U64.pack(n) for n in v.shape)]
    if not v.numel():
        return
    if v.requires_grad:
        v = v.detach()
    if v.dtype is torch.bfloat16 or v.is_conj() or v.is_neg():  # numpy has no bfloat16 and refuses those bits
        # A uint8 view of the same memory: its bytes, without a per-element copy in Python.
        out.append(v.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        out.append(v.numpy().tobytes())  # row-major bytes, whatever the strides: a view needs no contiguous copy first


def decode(data: bytes, *, max_items: int = 1_000_000) -> Any:
    """The value ``data`` encodes; CodecError when it encodes nothing plain,
    has bytes left over, or holds more than ``max_items`` container items."""
    reader = _Reader(bytes(data), max_items)
    value = reader.value(0)
    if reader.pos != len(data):
        raise CodecError(f"{len(data) - reader.pos} byte(s) after the value")
    return value


# Tags as byte values: the reader compares ints, without a bytes object per value.
_N, _T, _F, _I, _FL, _C, _S, _L, _TU, _D, _Y, _X, _Z = b"NTFifcsltdyxz"
_SCALAR_TAGS = frozenset((_N, _T, _F, _I, _FL, _C, _S))


class _Reader:
    def __init__(self, data: bytes, max_items: int) -> None:
        self.data, self.pos, self.items = data, 0, max_items

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise CodecError("truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def unpack(self, fmt: struct.Struct) -> Any:
        end = self.pos + fmt.size
        if end > len(self.data):
            raise CodecError("truncated")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos = end
        return values

    def count(self) -> int:
        (n,) = self.unpack(_U32)
        self.items -= n
        if self.items < 0:
            raise CodecError("too many items")
        return n

    def dtype(self) -> torch.dtype:
        (n,) = self.unpack(_U8)
        dtype = DTYPES.get(self.take(n).decode("ascii", "replace"))
        if dtype is None:
            raise CodecError("unknown dtype")
        return dtype

    def text(self) -> str:
        data, start = self.data, self.pos + 4
        if start > len(data):
            raise CodecError("truncated")
        end = start + _U32.unpack_from(data, self.pos)[0]
        if end > len(data):
            raise CodecError("truncated")
        self.pos = end
        try:
            return data[start:end].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise CodecError("not UTF-8") from None

    def value(self, depth: int) -> Any:
        if self.pos >= len(self.data):
            raise CodecError("truncated")
        tag = self.data[self.pos]
        self.pos += 1
        if tag == _S:  # the commonest first: names, keys
            return self.text()
        if depth > MAX_DEPTH and tag not in _SCALAR_TAGS:  # as validate counts: a scalar may sit one deeper
            raise CodecError(f"nested deeper than {MAX_DEPTH}")
        if tag == _L or tag == _TU:
            items = [self.value(depth + 1) for _ in range(self.count())]
            return items if tag == _L else tuple(items)
        if tag == _Z:
            count = self.count()
            (size,) = self.unpack(_U32)
            try:
                names = self.take(size).decode("utf-8", "surrogatepass").split("\0")
            except UnicodeDecodeError:
                raise CodecError("not UTF-8") from None
            if len(names) != count or not count:
                raise CodecError("a list of str whose count does not match")
            return names
        if tag == _D:
            result = {}
            for _ in range(self.count()):
                if self.pos < len(self.data) and self.data[self.pos] == _S:
                    self.pos += 1
                    key = self.text()
                else:
                    key = self.value(depth + 1)
                    if type(key) is not str:
                        raise CodecError("a dict key that is not a str")
                result[key] = self.value(depth + 1)
            return result
        if tag == _N:
            return None
        if tag == _T:
            return True
        if tag == _F:
            return False
        if tag == _I:
            (n,) = self.unpack(_U32)
            if n > MAX_INT_DIGITS:
                raise CodecError("an int too long")
            try:
                return int(self.take(n).decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                raise CodecError("not an int") from None
        if tag == _FL:
            return self.unpack(_F64)[0]
        if tag == _C:
            real, imag = self.unpack(_C128)
            return complex(real, imag)
        if tag == _Y:
            return self.dtype()
        if tag == _X:
            return self.tensor()
        raise CodecError(f"unknown tag {bytes([tag])!r}")

    def tensor(self) -> torch.Tensor:
        dtype = self.dtype()
        (ndim,) = self.unpack(_U8)
        if ndim > MAX_DIMS:
            raise CodecError(f"a tensor of {ndim} dimensions")
        shape = [self.unpack(_U64)[0] for _ in range(ndim)]
        numel = 1
        for n in shape:
            numel *= n
        size = numel * dtype.itemsize
        if size > len(self.data) - self.pos:  # checked before any allocation of that size
            raise CodecError("truncated tensor")
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        raw = bytearray(memoryview(self.data)[self.pos:self.pos + size])  # one copy we own: no alias of the frame
        self.pos += size
        if dtype is torch.bool:  # any byte but 0 or 1 would be a bool torch never makes
            return (torch.frombuffer(raw, dtype=torch.uint8) != 0).reshape(shape)
        return torch.frombuffer(raw, dtype=dtype).reshape(shape)
