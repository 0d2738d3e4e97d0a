"""Memory measured from outside: a check that a call never needs anything
near an (n, n) matrix, judged on the peak resident memory the sandbox reads
for the child from ``/proc`` around the call (``CallResult.peak_rss``,
grader/sandbox/proc.py), never on anything the child reports.

Two figures, each judged alike (below ``matrix / 2`` it passes, from
``matrix`` on it fails): how far the call's peak rose above what the child
held when the call was sent (``peak_growth``: a naive attention needs
several such matrices), and how far its peak lies above the reference's
peak for the same call. The second is the one the child cannot lower by
reusing memory it set aside and freed before the call (at import time, or
in an earlier call: a freed heap stays resident and is reused without
raising the peak). Such checks run first in the child (``Check.runs_first``),
the measured call last of its check, after a short call of the same probe
that warms the child up (PyTorch's first backward imports hundreds of
modules): only the import and that warm-up come before it, for the
reference as for the submission; what a library imported beside the code holds (the largest
importable here, matplotlib, holds 14 MiB) stays far below ``matrix / 2``.
Either failing fails; a figure in between decides nothing: the check
could not tell, scores no points for now and goes to the instructor's
review list, as grader/checks/work.py's.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grader.checks import CouldNotTell, RunRule
from grader.course import Text
from grader.sandbox import CallResult, ProbeCall, RunResult

MIB = 1 << 20


@dataclass(frozen=True)
class MemoryBudget:
    """The probe whose call is measured, the bytes of the (n, n) matrix it
    must never build, and the words of its reason."""

    probe: str
    matrix_bytes: int
    what: Text           # e.g. "the forward pass" / "前向计算"


def _call(run: RunResult, inputs: Sequence[ProbeCall], probe: str) -> CallResult | None:
    # The last call of the probe: those before it warm the child up (a recorded
    # call, grader/checks/forbidden.py: observed, names its probe inside).
    index = next((i for i in reversed(range(len(inputs)))
                  if probe in (inputs[i].probe, inputs[i].kwargs.get("probe"))), None)
    return run.calls[index] if index is not None and index < len(run.calls) else None


def above_reference(call: CallResult, reference: CallResult | None) -> int | None:
    """How far the call's peak lies above the reference's for the same call (bytes)."""
    if reference is None or reference.peak_rss is None or call.peak_rss is None:
        return None
    return call.peak_rss - reference.peak_rss


def verdict(figure: int | None, matrix_bytes: int, reference_growth: int | None) -> str:
    """"pass", "fail" or "could not tell" for a call's peak growth, or for
    its peak above the reference's."""
    if figure is None or reference_growth is None or reference_growth >= matrix_bytes // 4:
        return "could not tell"   # the reference itself is not far from the matrix here
    if figure < matrix_bytes // 2:
        return "pass"
    return "fail" if figure >= matrix_bytes else "could not tell"


class MeasuredReason(str):
    """A failure's words, with figures measured in this run, and its fixed
    kind: the signature a pitfall variant's failure is matched on."""

    kind: str

    def __new__(cls, words: str, kind: str) -> MeasuredReason:
        reason = super().__new__(cls, words)
        reason.kind = kind
        return reason


TOO_MUCH_MEMORY = "peak memory of an n×n matrix"


def _mib(count: int) -> str:
    return f"{count / MIB:.0f} MiB"


def _reason(budget: MemoryBudget, figure: int, reference_growth: int, above: bool) -> MeasuredReason:
    """What a student reads: the measured figure, the matrix's size and what
    a tiled pass needs (the reference's figure), never an input."""
    grew, matrix, tiled = _mib(figure), _mib(budget.matrix_bytes), _mib(max(reference_growth, MIB))
    en = (f"peak memory was {grew} above the reference's in the same call" if above
          else f"peak memory grew by {grew}")
    zh = f"峰值内存比参考答案在同一调用中高出 {grew}" if above else f"峰值内存增加了 {grew}"
    return MeasuredReason(f"{budget.what.en}: {en} (measured by the grader); an n×n matrix is {matrix}; "
            f"a tiled pass needs about {tiled}. Never build the (n_q, n_k) scores or weights, in the backward "
            f"either / {budget.what.zh}：{zh}（由评分程序测量）；一个 n×n 矩阵是 {matrix}；"
            f"分块计算只需要大约 {tiled}。无论前向还是反向，都不要构造 (n_q, n_k) 的分数或权重矩阵", TOO_MUCH_MEMORY)


def _out_of_memory(call: CallResult) -> bool:
    """The call hit the address-space limit: Python's MemoryError or torch's allocator."""
    return call.error_type == "MemoryError" or (
        call.error_type == "RuntimeError" and "can't allocate memory" in (call.error or ""))


def peak_memory_within(budgets: Sequence[MemoryBudget], could_not_tell: Text) -> RunRule:
    """A run rule: each measured call's peak memory stays far below its
    (n, n) matrix (the first that does not names its reason, and a call
    that ran out of memory fails alike), else could not tell."""

    def rule(inputs: Sequence[ProbeCall], run: RunResult, expected: RunResult) -> str | None:
        undecided = []
        for budget in budgets:
            call, reference = _call(run, inputs, budget.probe), _call(expected, inputs, budget.probe)
            if call is not None and not call.ok and _out_of_memory(call):
                return MeasuredReason(f"{budget.what.en}: ran out of memory; an n×n matrix is "
                                      f"{_mib(budget.matrix_bytes)} / {budget.what.zh}：内存耗尽；一个 n×n 矩阵是 "
                                      f"{_mib(budget.matrix_bytes)}", TOO_MUCH_MEMORY)
            if call is None or not call.ok:
                continue   # no figure: the call's own failure says what went wrong
            reference_growth = None if reference is None else reference.peak_growth
            for figure, above in ((call.peak_growth, False), (above_reference(call, reference), True)):
                outcome = verdict(figure, budget.matrix_bytes, reference_growth)
                if outcome == "fail":
                    return _reason(budget, figure, reference_growth or 0, above)
                if outcome == "could not tell":
                    undecided.append(f"{budget.probe.rsplit(':', 1)[-1]}: "
                                     f"{'above the reference' if above else 'grew'} "
                                     f"{'?' if figure is None else _mib(figure)}; "
                                     f"the matrix is {_mib(budget.matrix_bytes)}")
        words = f"{could_not_tell.en} / {could_not_tell.zh}"
        return CouldNotTell(words, "; ".join(undecided)) if undecided else None

    return rule
