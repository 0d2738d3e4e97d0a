"""Feedback texts, built on the trusted side from fixed words only.

Nothing a submission controls is copied into feedback: not an error's
message, not the name of an exception class it defines, not what it
prints. What the grader says about a run comes from facts it establishes
itself: the run's status and the course's limits, the check that was
running, the submitted source parsed here (never executed), the stub's
public names, and shapes of returned tensors written as symbols.

One table gives every status in English and Chinese (:data:`STATUSES`).
"""
from __future__ import annotations

import ast
import builtins
import functools
import re
import signal
from collections.abc import Sequence
from typing import NamedTuple

from grader.course import Text
from grader.module_names import missing_names, public_names, top_level_names  # noqa: F401 - re-exported

# Every status a result can have, in both languages: ``unreadable`` is a
# submission that could not be read (grader/intake/), ``grader_error`` a
# judging that failed on the grader's side (graded again by the next run),
# ``late`` an exam's.
STATUSES: dict[str, Text] = {
    "graded": Text(en="graded", zh="已评分"),
    "not_started": Text(en="not started", zh="未开始"),
    "not_submitted": Text(en="not submitted", zh="未提交"),
    "unreadable": Text(en="could not be read", zh="无法读取"),
    "late": Text(en="late", zh="迟交"),
    "import_error": Text(en="could not be imported", zh="无法导入"),
    "timeout": Text(en="timed out", zh="超时"),
    "crashed": Text(en="crashed", zh="崩溃"),
    "memory": Text(en="ran out of memory", zh="内存不足"),
    "output_limit": Text(en="printed too much", zh="输出过多"),
    # Kept for results recorded before ``tampered`` replaced it.
    "protocol_error": Text(en="returned something that is not plain data", zh="返回了非普通数据"),
    "tampered": Text(en="tampered with the grader's result channel: every check scores 0",
                     zh="篡改了评分程序的结果通道：所有检查均计 0 分"),
    "grader_error": Text(en="not graded yet: the grader failed (it will be graded again)",
                         zh="尚未评分：评分程序出错（下次运行会重新评分）"),
}


class Phrase(NamedTuple):
    """A piece of feedback in both languages (may be empty, unlike Text)."""

    en: str
    zh: str


def status_text(status: str) -> Text:
    """The status in both languages; an unknown one as itself (never raises)."""
    return STATUSES.get(status, Text(en=status, zh=status))


def both(en: str, zh: str) -> str:
    """A recorded reason in both languages, for every place that shows it."""
    return f"{en} / {zh}"


# --- exception names ----------------------------------------------------------

@functools.cache
def known_exceptions() -> frozenset[str]:
    """Builtin and torch exceptions: the only class names shown to a
    student. A class the submission defines could carry any text in its name."""
    import torch  # here, not at the top: the reports and exports need no torch

    modules = (builtins, torch, torch.linalg, torch.cuda, torch.jit, torch.autograd)
    return frozenset(obj.__name__ for module in modules for obj in vars(module).values()
                     if isinstance(obj, type) and issubclass(obj, BaseException))


FOREIGN_EXCEPTION = "an exception of a class defined in your code"


def exception_name(error_type: str | None) -> str:
    """``error_type`` when it is a builtin or torch exception, else fixed words."""
    return error_type if error_type in known_exceptions() else FOREIGN_EXCEPTION


# torch's own shape errors, recognised (never quoted): each kind has a fixed
# explanation. A submission can raise a look-alike; it then gets this text.
SHAPE_ERRORS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("matmul", re.compile(r"shapes cannot be multiplied|Expected size for first two dimensions of batch2"
                          r"|size mismatch"
                          r"|Expected .*batch1.*batch2|inconsistent tensor size"),
     "a shape error in a product: the inner sizes of the two tensors do not fit"),
    ("broadcast", re.compile(r"must match the size of tensor|The expanded size of the tensor|"
                             r"not broadcastable|doesn't match the broadcast shape"),
     "a shape error: two tensors' sizes do not broadcast together"),
    ("view", re.compile(r"is invalid for input of size|view size is not compatible"),
     "a shape error in view/reshape: the new shape does not hold the same number of elements"),
    ("dim", re.compile(r"Dimension out of range|too many indices for tensor|number of dims don't match"),
     "a shape error: a dimension index does not exist in a tensor of that many dimensions"),
)


def shape_error_kind(error_type: str | None, error: str | None) -> tuple[str, str] | None:
    """(kind, fixed explanation) when a raised error reads like one of
    torch's shape errors, else None."""
    if error_type not in ("RuntimeError", "IndexError", "ValueError"):
        return None
    for kind, pattern, explanation in SHAPE_ERRORS:
        if pattern.search(error or ""):
            return kind, explanation
    return None


# --- shapes of returned tensors, as symbols ---------------------------------

_SYMBOLS = "abcdefghijkmnpqrstuvwxyz"


class ShapeSymbols:
    """Shapes written with a letter per distinct size (equal sizes, equal
    letters, shared by every shape one message shows): the structure of a
    mistake without the hidden sizes."""

    def __init__(self) -> None:
        self.letters: dict[int, str] = {}

    def show(self, shape: Sequence[int]) -> str:
        for size in shape:
            self.letters.setdefault(size, _SYMBOLS[len(self.letters) % len(_SYMBOLS)])
        inner = ", ".join(self.letters[s] for s in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"


def input_shapes(kwargs: dict, symbols: ShapeSymbols) -> str:
    """"query (a, b, c), key (a, d, c)": the tensors a hidden call passed, by
    the probe's argument names (the grader's words), sizes as letters."""
    import torch

    shown = [f"{name} {symbols.show(tuple(value.shape))}" for name, value in kwargs.items()
             if type(value) is torch.Tensor and value.dim() > 0]
    return ", ".join(shown[:6])


def _first_shape_mismatch(mine: object, theirs: object,
                          where: tuple[str, ...]) -> tuple[tuple[str, ...], tuple, tuple] | None:
    import torch

    if type(theirs) is torch.Tensor:
        if type(mine) is torch.Tensor and mine.shape != theirs.shape:
            return where, theirs.shape, mine.shape
        return None
    if isinstance(theirs, dict) and isinstance(mine, dict):
        for key, value in theirs.items():  # the reference's keys only: names the grader chose
            if key in mine and (found := _first_shape_mismatch(mine[key], value, (*where, str(key)))):
                return found
    elif isinstance(theirs, (list, tuple)) and isinstance(mine, (list, tuple)):
        for a, b in zip(mine, theirs):
            if found := _first_shape_mismatch(a, b, where):
                return found
    return None


MAX_SHOWN_RANK = 8


def shape_detail(submitted: object, expected: object, inputs: dict | None = None) -> str | None:
    """"expected shape (a, b, c), yours (a, c, b), for inputs x (a, b, c)"
    for the first returned tensor whose shape differs from the reference's,
    else None. Sizes are letters: the hidden inputs' sizes never appear,
    their pattern does."""
    found = _first_shape_mismatch(submitted, expected, ())
    if found is None:
        return None
    where, theirs, mine = found
    symbols = ShapeSymbols()
    place = f" of {'.'.join(where)}" if where else ""
    # Beyond MAX_SHOWN_RANK dimensions only their number: the letters are a
    # channel the submission writes in, bounded per page (SECURITY.md).
    yours = symbols.show(tuple(mine)) if len(mine) <= MAX_SHOWN_RANK else f"has {len(mine)} dimensions"
    text = f"expected shape{place} {symbols.show(tuple(theirs))}, yours {yours}"
    given = input_shapes(inputs or {}, symbols)
    return f"{text}, for inputs {given}" if given else text


# --- the submitted source, parsed here ---------------------------------------

class SourceProblem(NamedTuple):
    """Why a submitted module is not valid Python, found by parsing it here."""

    kind: str          # "syntax", "encoding" or "null"
    line: int = 0
    column: int = 0
    byte: int = -1     # the first byte that is not UTF-8 ("encoding")


def source_problem(source: bytes, filename: str) -> SourceProblem | None:
    """Why ``source`` does not parse, or None if it does. Parsing runs no
    code; everything reported is a fact of the file the student wrote."""
    if b"\0" in source:
        return SourceProblem("null", source[: source.index(b"\0")].count(b"\n") + 1)
    try:
        compile(source, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        if "codec can't decode" in str(exc.msg) and not _has_cookie(source):
            try:
                source.decode("utf-8")
            except UnicodeDecodeError as bad:
                return SourceProblem("encoding", source[: bad.start].count(b"\n") + 1, byte=source[bad.start])
        return SourceProblem("syntax", exc.lineno or 0, exc.offset or 0)
    except Exception:  # noqa: BLE001 - any bytes at all: the grader goes on (RecursionError, MemoryError, ...)
        return SourceProblem("syntax")
    return None


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _has_cookie(source: bytes) -> bool:
    return any(_COOKIE.match(line) for line in source.splitlines()[:2])


# --- causes that break a whole run ---------------------------------------------

def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


_SIGNAL = re.compile(r"killed by signal (\d+)")
_EXIT = re.compile(r"^exited \(code (\d+)\)")
_IMPORT_RAISED = re.compile(r"^importing \w+\.py raised (\w+)")
# The child's text when Python raised SyntaxError at import, although the
# source parses here: a module it imports, or a SyntaxError raised by hand.
_IMPORT_SYNTAX = re.compile(r"^\w+\.py has a syntax error")


def run_cause(status: str, raw_reason: str, *, limits: object | None, where: Phrase,
              problem: SourceProblem | None, module: str) -> Phrase:
    """Why a run broke, in fixed words: the course's limit where one was hit.

    ``raw_reason`` is the sandbox's own description; only its head (before
    the first ": ", which the sandbox composes from fixed words) is read,
    and only for numbers and the kind of end. What follows the head, and the
    text of an import error, may come from the submission: never shown."""
    head = raw_reason.split(": ", 1)[0]
    timeout_s = getattr(limits, "timeout_s", None)
    if status == "import_error":
        if problem is not None:
            return _source_problem_text(problem, module)
        raised = _IMPORT_RAISED.match(raw_reason)
        if raised is None and not _IMPORT_SYNTAX.match(raw_reason):
            return Phrase(en=f"{module} could not be imported", zh=f"无法导入 {module}")
        name = exception_name(raised.group(1)) if raised else "SyntaxError"
        if name == FOREIGN_EXCEPTION:
            return Phrase(en=f"importing {module} raised {FOREIGN_EXCEPTION}",
                        zh=f"导入 {module} 时抛出了你代码中定义的异常类")
        return Phrase(en=f"importing {module} raised {name} (the error's text is not shown: run your module's "
                       f"public tests to see it)",
                    zh=f"导入 {module} 时抛出 {name}（不显示错误信息：运行公开测试查看）")
    if status == "timeout":
        cpu_s = getattr(limits, "cpu_s", None)
        if "CPU time" in head and cpu_s:
            return Phrase(en=f"used more than {cpu_s:g} s of CPU time (the course's limit){where.en}",
                        zh=f"CPU 时间超过课程限制 {cpu_s:g} 秒{where.zh}")
        seconds = f" after {timeout_s:g} s (the course's limit)" if timeout_s else ""
        return Phrase(en=f"timed out{seconds}{where.en}",
                    zh=f"运行超时{f'（课程限制 {timeout_s:g} 秒）' if timeout_s else ''}{where.zh}")
    if status == "memory":
        memory_mb = getattr(limits, "memory_mb", None)
        limit = f" {memory_mb} MiB" if memory_mb else ""
        return Phrase(en=f"used more than{limit}, the course's memory limit{where.en}",
                    zh=f"内存使用超过课程限制{limit}{where.zh}")
    if status == "output_limit":
        kib = getattr(limits, "output_limit_kb", None)
        return Phrase(en=f"printed more than {kib} KiB (the course's limit on printed output){where.en}",
                    zh=f"打印输出超过课程限制 {kib} KiB{where.zh}")
    if status == "protocol_error":
        return Phrase(en=f"sent back something that is not plain data{where.en}",
                    zh=f"返回了非普通数据{where.zh}")
    if status == "tampered":
        return Phrase(en=f"the run's results did not come from the grader's own probes{where.en} (a forged, "
                         f"extra, missing or out-of-order result, or the grader's pipes used by your code): "
                         f"nothing the run sent back can be trusted, so every check of this exercise scores 0",
                      zh=f"本次运行的结果并非来自评分程序自己的探针{where.zh}（伪造、多余、缺失或乱序的结果，"
                         f"或你的代码使用了评分程序的管道）：运行返回的内容都不可信，因此本练习的所有检查均计 0 分")
    if head.startswith("the sandbox failed"):
        return Phrase(en=f"the sandbox failed{where.en}", zh=f"沙箱运行失败{where.zh}")
    if (killed := _SIGNAL.search(head)) is not None:
        number = int(killed.group(1))
        return Phrase(en=f"killed by signal {number} ({signal_name(number)}){where.en}",
                    zh=f"被信号 {number}（{signal_name(number)}）终止{where.zh}")
    if (exited := _EXIT.match(head)) is not None:
        return Phrase(en=f"exited (code {exited.group(1)}){where.en} before finishing",
                    zh=f"在完成前退出（退出码 {exited.group(1)}）{where.zh}")
    return Phrase(en=f"ended before finishing{where.en}", zh=f"在完成前意外结束{where.zh}")


def _source_problem_text(problem: SourceProblem, module: str) -> Phrase:
    if problem.kind == "null":
        return Phrase(en=f"{module} contains null bytes (line {problem.line}), which Python source cannot hold",
                      zh=f"{module} 含有空字节（第 {problem.line} 行），Python 源码不能包含空字节")
    if problem.kind == "encoding":
        return Phrase(en=f"{module} is not UTF-8 text: can't decode byte 0x{problem.byte:02x} on line {problem.line} "
                         f"(save the file as UTF-8)",
                      zh=f"{module} 不是 UTF-8 文本：第 {problem.line} 行的字节 0x{problem.byte:02x} 无法解码（请以 UTF-8 保存）")
    if problem.line == 0:
        return Phrase(en=f"{module} cannot be read as Python source", zh=f"{module} 无法作为 Python 源码读取")
    return Phrase(en=f"{module} has a syntax error on line {problem.line}, column {problem.column} "
                     f"(run `python -m py_compile {module}` for Python's message)",
                  zh=f"{module} 第 {problem.line} 行第 {problem.column} 列有语法错误（运行 `python -m py_compile "
                     f"{module}` 查看 Python 的提示）")


def memory_limit(limits: object | None) -> Phrase:
    """What a call that ran out of memory gets: the course's limit, not
    PyTorch's allocation error."""
    memory_mb = getattr(limits, "memory_mb", None)
    limit = f" {memory_mb} MiB" if memory_mb else ""
    return Phrase(en=f"used more than{limit}, the course's memory limit", zh=f"内存使用超过课程限制{limit}")


def beyond_status(status: str, reason: str) -> str:
    """``reason`` without what the status already says ("not submitted:
    not submitted" is said once): "" when it adds nothing."""
    words = status_text(status).en
    if reason.strip().lower() in (words, status):
        return ""
    for prefix in (f"{words}: ", f"{status}: "):
        if reason.lower().startswith(prefix):
            return reason[len(prefix):]
    return reason
