"""One run as the grader sees it: the I/O loop over the child's pipes, the
frame state machine, and the verdict on how the run ended.

Frames must arrive as ``layers`` then either ``import_error`` or
``imported``, then, per call in order, ``result i`` / ``error i``, then
``done``, each numbered by the child's sender (``seq`` 0, 1, 2, ...). The
grader writes the calls in batches (one check's calls, or a single call):
the first batch only after ``imported``, each next one only after the
previous batch's last result, and ``end`` after the last.

The child's own sender (grader/sandbox/channel.py) never breaks that order,
so anything else (a forged, extra, repeated, missing or out-of-order frame,
a garbled header, a foreign bell word, more than ``wire.MAX_TOTAL`` bytes,
the child's own report or exit status saying its channel was disturbed)
ends the run as ``tampered``, keeping no call's result. A run that ends
without ``done`` otherwise (a crash, a limit) keeps the calls it finished;
a frame cut by that end is dropped, and how the child ended says whose
doing it was.
"""
from __future__ import annotations

import os
import selectors
import signal
import time

from grader.sandbox import proc, wire
from grader.sandbox.proc import ends_within, oom_kill_count  # noqa: F401 - the client reads them here
from grader.sandbox.model import CallResult, Limits, RunResult, raised_where

_TEXT_LIMIT = 500
# The child rings its bell about once per batch; far more is a flood of the
# grader's attention (each ring wakes it), ended like too much output.
MAX_BELL_BYTES = 1 << 20


class RunState:
    """Collects one run's frames and output."""

    def __init__(self, limits: Limits, probes: list[str], module_name: str) -> None:
        self.limits = limits
        self.probes = probes
        self.module_name = module_name
        self.layers: dict[str, str] = {}
        self.calls: list[CallResult] = []
        self.current: int | None = None       # the call the child runs now: its batch's first one not answered
        self._batch_end = 0                   # the calls sent so far: [0, _batch_end)
        self._sent_batches = 0
        self.memory_call: int | None = None
        self.import_error: str | None = None
        self.tampered: str | None = None      # why the run's frames cannot be the child's own (the grader's words)
        self._seq = 0                         # the next frame's number
        self._bell_gone = False
        self.fatal: str | None = None
        self.done = False
        self.timed_out = False
        self.output_exceeded = False
        self.imported = False
        self.hung_up = False                  # the result stream reached end of file before the run ended
        self.cut = False                      # ... in the middle of a frame
        self.lived_on = False                 # ... and the child was still alive after it (the grader killed it)
        self._batches: list[tuple[int, bytes]] = []
        self._outbox = bytearray()
        self._request_fd = -1
        self._sel: selectors.BaseSelector | None = None
        self.output = {1: bytearray(), 2: bytearray()}
        self._reader = wire.FrameReader()
        self._bell_bytes = 0
        self.pid: int | None = None           # the child's, set by the client: its CPU time and memory are read
        self._cpu_before: proc.Reading | None = None   # from /proc when a batch of one call is sent,
        self._rss_before: int | None = None            # its peak memory reset then

    # -- I/O ------------------------------------------------------------------

    def pump(self, fds: list[int], batches: list[tuple[int, bytes]], deadline: float) -> None:
        """Feed the calls and read results and output until the run is over:
        done, failed, out of time or output, or the child is gone. ``batches``:
        (number of calls, ready frame) pairs in call order, each written once
        the child is ready (``child._serve``). The result pipe is read when the
        bell rings, when anything else wakes this loop, and always while the
        child streams or the bell is gone (see ``child``)."""
        request_w, result_r, out_r, err_r, bell_r = fds
        for fd in fds:
            os.set_blocking(fd, False)
        self._batches, self._outbox, self._request_fd = batches, bytearray(), request_w
        sel = selectors.DefaultSelector()
        self._sel = sel
        sel.register(bell_r, selectors.EVENT_READ, "bell")
        sel.register(out_r, selectors.EVENT_READ, 1)
        sel.register(err_r, selectors.EVENT_READ, 2)
        quiet, watching = True, False  # the child's last word on the bell; result_r registered
        try:
            while not self._finished():
                left = deadline - time.monotonic()
                if left <= 0:
                    if self._drain_results(result_r):
                        self.timed_out = not self._finished()
                    else:
                        self.hung_up = True
                    return
                events = sel.select(timeout=left)
                for key, _ in events:
                    if key.data == "bell":
                        word = self._read_bell(key.fd)
                        if word is None:  # the bell is gone (the child, or its code closed it)
                            sel.unregister(key.fd)
                            quiet = False
                        elif word:
                            quiet = word == b"w"
                if not self._drain_results(result_r):
                    self.hung_up = True
                    return  # end of file: the child is gone (or closed its end)
                for key, _ in events:
                    if self._finished():
                        break
                    if key.data == "request":
                        self._write_request()
                    elif key.data in (1, 2) and not self._read_output(key.fd, key.data):
                        sel.unregister(key.fd)
                want = not quiet or self._reader.pending > 0  # a frame begun is read to its end
                if want and not watching:
                    sel.register(result_r, selectors.EVENT_READ, "result")
                elif watching and not want:
                    sel.unregister(result_r)
                watching = want
            if self.done and not self.tampered:   # a word rung just before 'done' and not read yet
                self._read_bell(bell_r)
        finally:
            sel.close()
            self._sel = None

    def _read_bell(self, fd: int) -> bytes | None:
        """The child's last word on the bell (b"" if none now), or None at end of file."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b""
        self._bell_bytes += len(data)
        if self._bell_bytes > MAX_BELL_BYTES:
            self.tampered = f"the bell rang more than {MAX_BELL_BYTES} times"
        elif data.translate(None, wire.BELL_WORDS):
            self.tampered = "something other than the child's sender wrote to the bell"
        self._bell_gone = self._bell_gone or not data
        return data[-1:] if data else None

    def _drain_results(self, fd: int) -> bool:
        """Read the result pipe until it is empty for now; False at end of file."""
        while not self._finished():
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return True
            if not self._take_results(data):
                return False
        return True

    def _queue(self, frame: bytes) -> None:
        """Send ``frame`` to the child as soon as its pipe takes it."""
        if not self._outbox and self._sel is not None:
            self._sel.register(self._request_fd, selectors.EVENT_WRITE, "request")
        self._outbox += frame
        self._write_request()

    def _write_request(self) -> None:
        try:
            del self._outbox[:os.write(self._request_fd, self._outbox)]
        except BlockingIOError:
            return
        except OSError:  # the child closed its end: it is gone or not listening
            self._outbox.clear()
        if not self._outbox and self._sel is not None:
            self._sel.unregister(self._request_fd)

    def _next_call(self) -> None:
        """A call was answered (or the module imported): expect the next
        call of the batch, or send the next batch (or the end) once the
        batch is all answered."""
        i = len(self.calls)
        if i < self._batch_end:
            self.current = i
            return
        if self._cpu_before is not None and i:  # a batch of one call, answered now
            self.calls[-1].cpu_s, self._cpu_before = proc.spent(self._cpu_before, proc.read(self.pid)), None
            self.calls[-1].rss_before, self.calls[-1].peak_rss = self._rss_before, proc.memory_peak(self.pid)
        if self._sent_batches < len(self._batches):
            count, frame = self._batches[self._sent_batches]
            self._sent_batches += 1
            self.current, self._batch_end = i, i + count
            if count == 1 and self.pid is not None:  # the child waits for it: nothing of its own runs now
                self._rss_before = proc.memory_mark(self.pid)
                self._cpu_before = proc.read(self.pid)
            self._queue(frame)
        else:
            self.current = None
            self._queue(wire.frame({"kind": "end"}))

    def _take_results(self, data: bytes) -> bool:
        """Parse what was read from the result pipe; False at end of file."""
        if not data:
            if self._reader.pending and not self._finished():
                self.cut = True  # an end, not a message: how the child ended says whose doing it was
            return False
        try:
            for header, payload in self._reader.feed(data):
                self._on_frame(header, payload)
                if self._finished():
                    break
        except wire.ProtocolError as exc:
            self.tampered = str(exc)
        except Exception as exc:  # whatever the bytes were, the grader goes on
            self.tampered = f"undecodable frame: {wire.one_line(exc)}"
        return True

    def _read_output(self, fd: int, stream: int) -> bool:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            return False
        buf = self.output[stream]
        room = self.limits.output_limit_kb * 1024 - len(buf)
        buf += data[: max(0, room)]
        if len(data) > room:
            self.output_exceeded = True
        return True

    def drain(self, fds: list[int], wait_for_eof: bool = True) -> None:
        """After the kill: collect what is left in the output pipes (until
        end of file, i.e. the child is gone, or only what is there now)."""
        for stream, fd in ((1, fds[2]), (2, fds[3])):
            cap = self.limits.output_limit_kb * 1024
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    if not wait_for_eof:
                        break
                    time.sleep(0.005)
                    continue
                except OSError:
                    break
                if not data:
                    break
                buf = self.output[stream]
                buf += data[: max(0, cap - len(buf))]

    def _finished(self) -> bool:
        return bool(self.done or self.import_error is not None or self.tampered or self.fatal
                    or self.output_exceeded)

    # -- frames ---------------------------------------------------------------

    def _on_frame(self, header: dict, payload: bytes) -> None:
        kind, i, seq = header["kind"], header.get("i"), header.get("seq")
        if type(seq) is not int or seq != self._seq:
            # A frame beside the child's sender, or one of its frames swallowed.
            raise wire.ProtocolError(f"frame {kind!r} numbered {seq!r} where frame {self._seq} was due")
        self._seq += 1
        if kind == "tampered":  # the child found its request pipe or bell used by someone else
            self.tampered = f"the child reports: {_text(header.get('error'), 200)}"
            return
        if not self.layers and kind != "layers":
            raise wire.ProtocolError(f"expected the layers report first, got {kind!r}")
        if kind == "layers":
            layers = header.get("layers")
            if self.layers or type(layers) is not dict or not all(
                    type(k) is str and type(v) is str for k, v in layers.items()):
                raise wire.ProtocolError("bad layers report")
            self.layers = {k[:60]: v[:_TEXT_LIMIT] for k, v in layers.items()}
        elif kind == "import_error" and not self.imported:
            self.import_error = _text(header.get("error"), 2000)
        elif kind == "imported" and not self.imported and self.current is None and not self.calls:
            self.imported = True
            self._next_call()
        elif kind == "result" and i == self.current and type(i) is int:
            try:
                self.calls.append(CallResult(ok=True, value=wire.loads(payload)))
            except wire.ProtocolError as exc:
                self.calls.append(CallResult(ok=False, error_type="ProtocolError", error=_text(str(exc))))
            self._next_call()
        elif kind == "error" and i == self.current and type(i) is int:
            self.calls.append(CallResult(ok=False, error_type=_text(header.get("error_type"), 100),
                                         error=_text(header.get("error")), where=raised_where(header.get("where"))))
            if header.get("memory") is True and self.memory_call is None:
                self.memory_call = i
            self._next_call()
        elif kind == "done" and self.imported and self.current is None and len(self.calls) == len(self.probes):
            if self._bell_gone:  # the child's own bell lives until its exit, after "done"
                raise wire.ProtocolError("the bell was closed before the run ended")
            self.done = True
        elif kind == "fatal":
            self.fatal = _text(header.get("error"))
        else:
            raise wire.ProtocolError(f"unexpected frame {kind!r} (call {i!r}) after {len(self.calls)} results")

    # -- verdict --------------------------------------------------------------

    def result(self, wait: dict | None, wall_s: float, oom_kills: int = 0) -> RunResult:
        """The RunResult; ``wait`` is the server's report on the reaped
        child (exit status, CPU seconds; ``{"op": "dead"}`` when the server
        is gone), used only to explain an early end; ``oom_kills``: how far
        the kernel's OOM-kill counter moved during the run."""
        status, reason = self._verdict(wait or {})
        # Nothing a tampered run sent back is kept: not even the calls answered before the break.
        calls = [] if status == "tampered" else self.calls
        text = {k: bytes(v).decode("utf-8", errors="replace") for k, v in self.output.items()}
        cap = self.limits.output_limit_kb * 1024
        for k, v in self.output.items():
            if len(v) >= cap:
                text[k] += f"\n[output truncated at {self.limits.output_limit_kb} KiB]"
        return RunResult(status=status, calls=calls, reason=reason, stdout=text[1], stderr=text[2],
                         wall_s=wall_s, ended_by=self._ended_by(wait, oom_kills))

    def _ended_by(self, wait: dict | None, oom_kills: int) -> str:
        """Who ended the run (see RunResult): decided from what the grader
        saw, in order of certainty."""
        if self.done or self.import_error is not None or self.fatal or self.tampered or wire.tamper_exit(wait):
            return "itself"  # it answered to the end, or its own frames ended it
        if self.timed_out or self.output_exceeded:
            return "limit"
        if wait is None:
            return "itself"
        status = wait.get("status")
        if wait.get("op") != "reaped" or not isinstance(status, int):
            return "infrastructure"  # the server died (taking the child with it) or lost the child
        if self.lived_on:
            return "itself"  # it closed its result stream and lived on: the grader's kill was cleanup
        if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGKILL:
            return "limit" if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU else "itself"
        if (wait.get("cpu_s") or 0.0) >= self.limits.cpu_s:
            return "limit"  # the CPU rlimit's hard SIGKILL
        if not self.layers:
            return "outside"  # before its layers report no student code had run
        if oom_kills > 0:
            return "oom_killer"
        # Nobody in the grader sent it. With the seccomp layer a child cannot
        # SIGKILL itself (see seccomp.py), so someone outside did; without it,
        # the child may have: not a fault of the machine, as far as anyone can tell.
        return "outside" if self.layers.get("seccomp") == "active" else "itself"

    def _where(self) -> str:
        if self.current is not None:
            return f" during call {self.current + 1} ({self.probes[self.current]})"
        if not self.layers:
            return " while starting"
        if not self.imported:
            return f" while importing {self.module_name}.py"
        if not self.calls:
            return f" after importing {self.module_name}.py"
        return f" after call {len(self.calls)}"

    def _memory_head(self) -> str:
        """A memory verdict names the first call out of memory first, whatever ended the run."""
        i = self.memory_call
        return f"call {i + 1} ({self.probes[i]}) exceeded the {self.limits.memory_mb} MiB memory limit"

    def _verdict(self, wait: dict) -> tuple[str, str]:
        status = wait.get("status")
        cpu = wait.get("cpu_s") or 0.0
        # After running out of memory, that stays the cause (the first mistake), however the run ended.
        ran_out = f"{self._memory_head()}, then " if self.memory_call is not None else ""
        if self.tampered or wire.tamper_exit(wait):
            why = self.tampered or "the child found its result pipe or its sender replaced or rewritten"
            return "tampered", f"the sandboxed run's result channel was tampered with{self._where()}: {why}"
        if self.import_error is not None:
            return "import_error", self.import_error
        if self.done:
            return ("memory", self._memory_head()) if ran_out else ("ok", "ok")
        if self.timed_out:
            return "memory" if ran_out else "timeout", \
                f"{ran_out}timed out after {self.limits.timeout_s:g} s{self._where()}"
        if self.output_exceeded:
            return "output_limit", f"printed more than {self.limits.output_limit_kb} KiB{self._where()}"
        if self.fatal:
            return "crashed", f"the sandbox failed{self._where()}: {self.fatal}"
        if self.lived_on:
            return "crashed", f"closed its result stream{self._where()} and was ended by the grader"
        if isinstance(status, int) and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.limits.cpu_s):
                return "memory" if ran_out else "timeout", \
                    f"{ran_out}used more than {self.limits.cpu_s:g} s of CPU time{self._where()}"
            if ran_out:
                return "memory", f"{ran_out}was killed by signal {sig} ({_signame(sig)}){self._where()}"
            return "crashed", f"killed by signal {sig} ({_signame(sig)}){self._where()}"
        if isinstance(status, int) and os.WIFEXITED(status):
            return "crashed", f"exited (code {os.WEXITSTATUS(status)}){self._where()} before finishing"
        return "crashed", f"ended before finishing{self._where()}"


def _text(value: object, limit: int = _TEXT_LIMIT) -> str:
    text = value if type(value) is str else f"<{type(value).__name__}, not text>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _signame(sig: int) -> str:
    return signal.Signals(sig).name if sig in {s.value for s in signal.Signals} else "unknown"
