"""Exercise 13's text: the Python standard library's own source, read as
characters.

Real text that every machine with Python has, offline: a fixed list of
pure-Python modules of the standard library, found next to the running
interpreter's ``os.py``. Nothing is downloaded. Their exact contents change
a little from one Python version to the next; the losses the course states
hold with a margin for that (bench/training_reliability.py measures them).

The vocabulary is fixed, whatever the files hold: newline and the 95
printable ASCII characters, 96 tokens; any other character (a rare accent
in a docstring) is read as ``?``.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import torch

# Small, self-contained, ASCII modules present since Python 3.9.
FILES = ("textwrap.py", "string.py", "bisect.py", "fnmatch.py", "colorsys.py", "graphlib.py", "queue.py",
         "sched.py", "glob.py", "keyword.py", "numbers.py", "abc.py", "copy.py", "random.py")
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
UNKNOWN = "?"
_INDEX = {ch: i for i, ch in enumerate(VOCAB)}
MIN_CHARACTERS = 50_000   # below this something is badly wrong with the installation


def stdlib_folder() -> Path:
    """Where this interpreter's standard library lives (beside ``os.py``)."""
    return Path(os.__file__).resolve().parent


def encode(text: str) -> torch.Tensor:
    """Characters -> token ids (1-D, torch.long)."""
    unknown = _INDEX[UNKNOWN]
    return torch.tensor([_INDEX.get(ch, unknown) for ch in text], dtype=torch.long)


def decode(ids: torch.Tensor | list[int]) -> str:
    """Token ids -> characters."""
    return "".join(VOCAB[int(i)] for i in ids)


@lru_cache(maxsize=1)
def corpus_text() -> str:
    """The files of :data:`FILES` that this Python has, one after the other."""
    folder = stdlib_folder()
    parts = [(folder / name).read_text(encoding="utf-8", errors="replace")
             for name in FILES if (folder / name).is_file()]
    text = "\n".join(parts)
    if len(text) < MIN_CHARACTERS:
        raise RuntimeError(f"the standard library's sources under {folder} hold only {len(text)} characters of "
                           f"{', '.join(FILES)}; is this Python installed without its .py files?")
    return text


def splits(val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """The corpus as token ids, split into (train, held-out): the held-out
    part is the last ``val_fraction`` of the text, never seen in training."""
    data = encode(corpus_text())
    cut = int(len(data) * (1 - val_fraction))
    return data[:cut], data[cut:]
