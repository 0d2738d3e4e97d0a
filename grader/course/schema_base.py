"""The base of course.yaml's models (grader/course/model.py, grader/course/exam_schema.py):
strict (unknown keys are errors, values frozen), and texts in two languages."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Strict):
    """A text in English and Chinese."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)
