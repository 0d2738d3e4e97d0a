"""The probe calls as the child receives them: encoded once, sent in
batches (one check's calls in one frame, after the import; see
``runstate.RunState.pump`` and ``child._serve``)."""
from __future__ import annotations

import weakref
from collections.abc import Sequence

from grader.sandbox import plaincodec, wire
from grader.sandbox.model import ProbeCall


class CallFrames:
    """Frames of batches of calls, each call encoded once per ProbeCall
    object (a judge sends the same hidden calls to every submission)."""

    def __init__(self) -> None:
        self._encoded: dict[int, tuple[weakref.ref, bytes]] = {}

    def batches(self, calls: Sequence[ProbeCall], sizes: list[int]) -> list[tuple[int, bytes]]:
        """(number of calls, frame) per batch; a batch whose payload would
        pass half the child's frame limit is split (inputs are small: it
        is a bound, not a plan)."""
        frames, first = [], 0
        for size in sizes:
            items = [self.encoded(call) for call in calls[first:first + size]]
            while items:
                n, total = 0, 0
                while n < len(items) and (n == 0 or total + len(items[n]) <= wire.MAX_FRAME // 2):
                    total += len(items[n])
                    n += 1
                frames.append((n, wire.frame({"kind": "calls", "i": first, "n": n},
                                             payload=plaincodec.encode_list(items[:n]))))
                first, items = first + n, items[n:]
        return frames

    def encoded(self, call: ProbeCall) -> bytes:
        """``[probe, kwargs]`` encoded, once per ProbeCall object: a judge
        sends the same hidden calls to every submission. (A ProbeCall is
        frozen; its kwargs must not change once it has run.) Raises
        ProtocolError when the kwargs are not plain data within
        :func:`wire.validate`'s limits, the child's own."""
        key = id(call)
        cached = self._encoded.get(key)
        if cached is not None and cached[0]() is call:
            return cached[1]
        wire.validate(call.kwargs)
        encoded = wire.dumps([call.probe, call.kwargs])
        self._encoded[key] = (weakref.ref(call, lambda _, key=key: self._encoded.pop(key, None)), encoded)
        return encoded


def batch_sizes(n_calls: int, batches: Sequence[int] | None) -> list[int]:
    """The batch sizes to send ``n_calls`` calls in (one each by default)."""
    if batches is None:
        return [1] * n_calls
    sizes = list(batches)
    if any(type(size) is not int or size < 1 for size in sizes) or sum(sizes) != n_calls:
        raise ValueError(f"batches must be positive counts adding up to the {n_calls} calls, not {sizes}")
    return sizes


PROBE_PACKAGE = "coursekit.probes."


def probe_modules(calls: Sequence[ProbeCall]) -> list[str]:
    """The probe library's modules the calls name: each call's probe, and
    the probe a recording probe runs (its ``probe`` argument). The
    fork-server imports these before it forks the run's child, so the
    confined child imports nothing of the library itself, and a server that
    grades exercise 01 never pays for the meta-device kernels 05 needs."""
    names = set()
    for call in calls:
        for probe in (call.probe, call.kwargs.get("probe")):
            if isinstance(probe, str) and probe.startswith(PROBE_PACKAGE):
                names.add(probe.partition(":")[0])
    return sorted(names)
