"""The wire format between the grader and a sandboxed child, and the safe
decoding of whatever the child sends back.

A frame is ``[u32 header length][u64 payload length][header][payload]``.
The header is a small JSON object (``{"kind": "result", "i": 3, ...}``);
the payload, when there is one, is a plain value in ``plaincodec``'s encoding.
Splitting the two means a payload that fails to decode is still attributed
to its call (a ``ProtocolError`` for that call), while a garbled header ends
the run as ``tampered`` (the child's own sender never writes one: see
``runstate``).

Everything the child sends is untrusted: it is decoded by ``plaincodec``
(plain types only: no pickle, no globals, every length checked), whose
decoder makes nothing but what :func:`validate` accepts (exact plain types,
within the same depth, item and size limits: a fuzz test holds it to that).
"""
from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from typing import Any

import torch

from grader.sandbox import plaincodec

PREFIX = _PREFIX = struct.Struct("<IQ")  # header length, payload length
MAX_HEADER = 64 * 1024
MAX_FRAME = plaincodec.MAX_TENSOR_BYTES  # one value, 64 MiB (a probe returns outputs, not checkpoints)
MAX_TOTAL = 256 * 1024 * 1024      # everything a run sends back: bounds the grader's memory per run
MAX_DEPTH = plaincodec.MAX_DEPTH  # 32
MAX_ITEMS = 1_000_000              # containers' elements, summed over a value
NO_VALUE = object()
# The bell's only words (grader/sandbox/child.py): "read what I sent, I wait
# for you" and "read as I write". Any other byte on it is not the child's.
BELL_WORDS = b"ws"
# The exit status of a child whose result pipe was replaced under it: it can
# tell the grader nothing else (runstate reads it as ``tampered``; code that
# exits with it itself only voids its own run).
TAMPER_EXIT = 86

_SCALARS = plaincodec.SCALAR_TYPES  # one set: the codec's depth rule must count as validate does


class ProtocolError(Exception):
    """Bytes from the child that are not a valid frame or not plain data."""


# -- encoding (both sides) ---------------------------------------------------

def dumps(value: Any) -> bytes:
    """The payload bytes of a plain value (``plaincodec``: no pickle)."""
    try:
        return plaincodec.encode(value)
    except plaincodec.CodecError as exc:
        raise ProtocolError(str(exc)) from None


def frame(header: dict, value: Any = NO_VALUE, *, payload: bytes | None = None) -> bytes:
    """One frame: ``header`` and, optionally, a value (or ready payload bytes)."""
    if payload is None:
        payload = b"" if value is NO_VALUE else dumps(value)
    head = json.dumps(header, separators=(",", ":")).encode()
    if len(head) > MAX_HEADER:
        raise ProtocolError(f"frame header too large ({len(head)} bytes)")
    return _PREFIX.pack(len(head), len(payload)) + head + payload


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking fd."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int, max_payload: int = MAX_FRAME) -> tuple[dict, bytes] | None:
    """Read one frame from a blocking fd (the child reading its next call);
    None at end of file."""
    prefix = _read_exactly(fd, _PREFIX.size)
    if prefix is None:
        return None
    head_len, payload_len = _PREFIX.unpack(prefix)
    if head_len > MAX_HEADER or payload_len > max_payload:
        raise ProtocolError("frame too large")
    head = _read_exactly(fd, head_len)
    payload = _read_exactly(fd, payload_len) if payload_len else b""
    if head is None or payload is None:
        raise ProtocolError("truncated frame")
    return _parse_header(head), payload


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except Exception as exc:  # also RecursionError: 64 KiB of "[[[[" is valid-looking JSON
        raise ProtocolError(f"frame header is not JSON: {one_line(exc, 100)}") from None
    if type(header) is not dict or type(header.get("kind")) is not str:
        raise ProtocolError("frame header is not an object with a 'kind'")
    return header


class FrameReader:
    """Incremental frame parser for the grader side: feed it bytes as they
    arrive; it yields complete frames and enforces the size caps."""

    def __init__(self, max_total: int = MAX_TOTAL) -> None:
        self._buf = bytearray()
        self._total = 0
        self._max_total = max_total

    def feed(self, data: bytes) -> Iterator[tuple[dict, bytes]]:
        """Add bytes; yield each frame completed by them."""
        self._total += len(data)
        if self._total > self._max_total:
            raise ProtocolError(f"the run sent more than {self._max_total >> 20} MiB of results")
        self._buf += data
        while len(self._buf) >= _PREFIX.size:
            head_len, payload_len = _PREFIX.unpack_from(self._buf)
            if head_len > MAX_HEADER or payload_len > MAX_FRAME:
                raise ProtocolError(f"frame too large (header {head_len} B, payload {payload_len} B)")
            end = _PREFIX.size + head_len + payload_len
            if len(self._buf) < end:
                return
            header = _parse_header(bytes(self._buf[_PREFIX.size:_PREFIX.size + head_len]))
            payload = bytes(self._buf[_PREFIX.size + head_len:end])
            del self._buf[:end]
            yield header, payload

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame (non-zero at EOF means a cut frame)."""
        return len(self._buf)


# -- decoding and validation (grader side) ----------------------------------

def loads(payload: bytes) -> Any:
    """Decode a payload from an untrusted child (:mod:`plaincodec`: only
    plain data within :func:`validate`'s limits comes out, so it is not
    walked again). Raises ProtocolError for anything else."""
    if len(payload) > MAX_FRAME:  # a decoded tensor is never larger than its payload
        raise ProtocolError(f"result is too large ({len(payload) >> 20} MiB)")
    try:
        return plaincodec.decode(payload, max_items=MAX_ITEMS)
    except Exception as exc:  # not plain data (also MemoryError's kin: say why, in one line)
        raise ProtocolError(f"undecodable result: {one_line(exc)}") from None


def validate(value: Any, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS,
             max_bytes: int = MAX_FRAME) -> None:
    """Require plain data: exact ``torch.Tensor`` (strided, CPU, bounded
    size: an expanded view can claim terabytes over a tiny storage), int,
    float, bool, complex, str, None, ``torch.dtype``, and list / tuple /
    dict-with-str-keys of those, nested at most ``max_depth`` deep."""
    budget = [max_items]

    def check(v: Any, depth: int, where: tuple) -> None:
        # ``where`` is (parent's where, key), formatted only for an error:
        # a string per item cost more than the check itself.
        if depth > max_depth:
            raise ProtocolError(f"{_where(where)}: nested deeper than {max_depth}")
        t = type(v)
        if t in _SCALARS or t is torch.dtype:
            return
        if t is torch.Tensor:
            _check_tensor(v, _where(where), max_bytes)
            return
        if t is list or t is tuple or t is dict:
            budget[0] -= len(v)
            if budget[0] < 0:
                raise ProtocolError(f"{_where(where)}: more than {max_items} items")
            if t is dict:
                for k, item in v.items():
                    if type(k) is not str:
                        raise ProtocolError(f"{_where(where)}: dict key of type {type(k).__name__}, not str")
                    if type(item) not in _SCALARS:
                        check(item, depth + 1, (where, repr(k[:40])))
            else:
                for n, item in enumerate(v):
                    if type(item) not in _SCALARS:
                        check(item, depth + 1, (where, n))
            return
        if isinstance(v, torch.Tensor):
            raise ProtocolError(f"{_where(where)}: a {t.__name__} (a torch.Tensor subclass); "
                                "only plain tensors may come back")
        raise ProtocolError(f"{_where(where)}: a {t.__module__}.{t.__qualname__} is not plain data")

    check(value, 0, ())


def _where(path: tuple) -> str:
    """``value[0]['x']`` from the (parent, key) chain :func:`validate` keeps."""
    keys = []
    while path:
        path, key = path
        keys.append(f"[{key}]")
    return "value" + "".join(reversed(keys))


def _check_tensor(t: torch.Tensor, where: str, max_bytes: int) -> None:
    if t.layout is not torch.strided or t.device.type != "cpu" or t.is_quantized:
        raise ProtocolError(f"{where}: only dense CPU tensors may come back ({t.layout}, {t.device})")
    if t.numel() * t.element_size() > max_bytes:
        raise ProtocolError(f"{where}: tensor of shape {tuple(t.shape)} is too large")


def sanitize(value: Any, depth: int = 0) -> Any:
    """Child side, before encoding: turn the harmless near-plain values a
    probe may produce into plain ones (``nn.Parameter`` and tensors that
    require grad → detached tensors, ``torch.Size`` → tuple, numpy scalars →
    Python numbers). Anything else is left for :func:`validate` to refuse."""
    t = type(value)
    if depth > MAX_DEPTH:
        return value
    if t is torch.Tensor or t is torch.nn.Parameter:
        return value.detach()
    if t is torch.Size:
        return tuple(value)
    if t is list or t is tuple:
        return t([v if type(v) in _SCALARS else sanitize(v, depth + 1) for v in value])
    if t is dict:
        return {k: sanitize(v, depth + 1) for k, v in value.items()}
    if t.__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``"RuntimeError: shape mismatch ..."``: one line, truncated."""
    try:  # a student's exception may have a __str__ that raises
        message = str(exc)
    except Exception:
        message = "<unprintable message>"
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tamper_exit(wait: dict | None) -> bool:
    """A child that ended with :data:`TAMPER_EXIT` (its own code choosing it voids only its own run)."""
    status = (wait or {}).get("status")
    return isinstance(status, int) and os.WIFEXITED(status) and os.WEXITSTATUS(status) == TAMPER_EXIT
