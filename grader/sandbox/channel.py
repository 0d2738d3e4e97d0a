"""The child's end of the result channel: the one sender of frames, the
bell, and the checks that the channel is still the grader's.

The student's code shares the child's process, so it can call the sender,
write to fd 4 itself, or rewrite what the sender uses. The grader cannot
stop that; it can make it show, and then void the run (``tampered``,
grader/sandbox/runstate.py):

- every frame carries ``seq``, from a counter the sender keeps: a frame
  written beside the sender, or sent through it out of turn, leaves a
  repeat, a gap or an unexpected frame that the grader sees;
- the sender uses only what was bound when this module was imported (in
  the fork-server, long before any student's code): C callables
  (``os.write``, the C JSON encoder, ``struct``'s packer), held in its
  closure, never looked up by name, so rebinding ``os.write``, ``wire``'s
  or this module's names does not reach it;
- before each frame it checks that fd 4 is still the pipe it was given (a
  pipe swapped for /dev/null to swallow a frame ends the run with
  :data:`wire.TAMPER_EXIT`: nothing else can be told through it), and the
  serve loop (whose running code nobody can change) compares the code,
  defaults and closures of the channel's functions with what they were
  before the import.

What remains possible is written down in SECURITY.md: code that rewrites
the sender's state (its counter) or the process's memory below Python, or
that forges a frame and ends the run at once, can send a consistent stream.
What such a frame can claim is what the student's code could have returned
itself: the points rest on the grader's own comparison of returned values.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from json.encoder import c_encode_basestring_ascii, c_make_encoder

from grader.sandbox import wire

REQUEST_FD, RESULT_FD, BELL_FD = 3, 4, 5
WAITING, STREAMING = wire.BELL_WORDS[:1], wire.BELL_WORDS[1:]  # read what I sent, I wait / read as I write


class Tampered(Exception):
    """The child found its request pipe or bell used by someone else."""


def _no_plain(value: object) -> object:
    raise TypeError(f"a {type(value).__name__} in a frame header")


# Headers hold only str, int, float, bool, None and dicts of them.
_ENCODE = c_make_encoder(None, _no_plain, c_encode_basestring_ascii, None, ":", ",", False, False, False)


class Channel:
    """The channel's functions (closures over one state) and that state."""

    def __init__(self) -> None:
        # budget: bytes the grader may leave unread (half the pipe); unread:
        # written since the grader last read; total: bytes sent this run
        # (the child refuses results past wire.MAX_TOTAL, so the grader can
        # read more as a stream the child's code did not write); sent: frames.
        state = {"budget": 32 * 1024, "unread": 0, "streaming": False, "total": 0, "sent": 0, "pipes": {}}
        self.state = state

        def seal(*, _fstat=os.fstat) -> None:
            """Note which pipes fds 3-5 are: :func:`check` compares them later."""
            state["pipes"] = {fd: (s.st_dev, s.st_ino) for fd in (REQUEST_FD, RESULT_FD, BELL_FD)
                              for s in (_fstat(fd),)}

        def check(fd: int, *, _fstat=os.fstat, _exit=os._exit) -> None:
            """Still the pipe the grader gave? A result pipe that is not ends
            the run at once; another raises :class:`Tampered`."""
            pipes = state["pipes"]
            if fd not in pipes:
                return
            try:
                s = _fstat(fd)
                same = (s.st_dev, s.st_ino) == pipes[fd]
            except OSError:
                same = False
            if not same and fd == RESULT_FD:
                _exit(wire.TAMPER_EXIT)
            if not same:
                raise Tampered(f"fd {fd} was replaced or closed by the module's code")

        def ring(word: bytes, *, _write=os.write) -> None:
            try:
                _write(BELL_FD, word)
            except OSError:  # closed by the student's code: the grader sees that too
                pass
            state["streaming"] = word == STREAMING
            if word == WAITING:
                state["unread"] = 0  # the grader reads it all before it sends what this child waits for

        def send(header: dict, payload: bytes = b"", *, _write=os.write, _encode=_ENCODE, _join="".join,
                 _pack=wire.PREFIX.pack) -> None:
            """Send one frame: ``header`` (numbered here) and payload bytes."""
            head = _join(_encode({**header, "seq": state["sent"]}, 0)).encode()
            data = memoryview(_pack(len(head), len(payload)) + head + payload)
            state["sent"] += 1  # counted before the write: a frame swallowed on its way out leaves a gap
            check(RESULT_FD)
            if not state["streaming"] and state["unread"] + len(data) > state["budget"]:
                ring(STREAMING)  # before a write that could block on a pipe nobody reads
            state["unread"] += len(data)
            state["total"] += len(data)
            while data:
                data = data[_write(RESULT_FD, data):]

        self.seal, self.check, self.ring, self.send = seal, check, ring, send

    def functions(self) -> tuple[Callable, ...]:
        return self.seal, self.check, self.ring, self.send
