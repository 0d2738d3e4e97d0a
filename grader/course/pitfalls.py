"""Pitfall variants: the reference solution with exactly one known mistake.

Each exercise's variants live in ``grader/pitfalls/NN_slug.yaml`` as
search-and-replace edits on the reference module, so every variant shows
its one mistake and nothing else::

    softmax-overflow:
      - old: "exp = torch.exp(x - row_max)"
        new: "exp = torch.exp(x)"

Every ``old`` text must occur exactly once in the reference; a variant
whose edits no longer apply (because the reference changed) is an error,
not a silently unchanged copy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

VARIANTS_DIR = Path(__file__).resolve().parents[1] / "pitfalls"  # the yaml files stay in grader/pitfalls/


class VariantError(Exception):
    """A variant file is malformed or its edits do not apply."""


@dataclass(frozen=True)
class Edit:
    old: str
    new: str


@dataclass(frozen=True)
class Variant:
    pitfall: str
    exercise_folder: str
    module: str
    source: str  # the reference's source with the edits applied


def variants_file(exercise_folder: str, root: Path | None = None) -> Path:
    base = (root / "grader" / "pitfalls") if root else VARIANTS_DIR
    return base / f"{exercise_folder}.yaml"


def apply_edits(reference: str, edits: list[Edit], *, label: str) -> str:
    source = reference
    for edit in edits:
        count = source.count(edit.old)
        if count != 1:
            raise VariantError(f"{label}: the text to replace occurs {count} times (must be exactly once): {edit.old!r}")
        source = source.replace(edit.old, edit.new)
    if source == reference:
        raise VariantError(f"{label}: the edits change nothing")
    return source


def load_variants(exercise, root: Path) -> dict[str, Variant]:
    """All variants of an exercise (a ``grader.course.Exercise``), applied to
    its reference solution under ``root/solutions``."""
    path = variants_file(exercise.folder, root)
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise VariantError(f"{path.name}: not valid YAML: {exc}") from exc
    reference = (root / "solutions" / exercise.folder / exercise.module).read_text(encoding="utf-8")
    variants = {}
    for pitfall_id, raw_edits in data.items():
        label = f"{path.name}: {pitfall_id}"
        if not isinstance(raw_edits, list) or not raw_edits:
            raise VariantError(f"{label}: expected a list of {{old, new}} edits")
        try:
            edits = [Edit(old=e["old"], new=e["new"]) for e in raw_edits]
        except (KeyError, TypeError) as exc:
            raise VariantError(f"{label}: each edit needs 'old' and 'new'") from exc
        variants[pitfall_id] = Variant(pitfall_id, exercise.folder, exercise.module, apply_edits(reference, edits, label=label))
    return variants
