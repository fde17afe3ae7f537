"""What every settings section shares: strictness, docstrings as descriptions, the prefix."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ENV_PREFIX", "FieldValueError", "Section", "env_name"]

ENV_PREFIX = "TRIBUNAL_"


class FieldValueError(ValueError):
    """A cross-field check's failure that still knows which field is at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class Section(BaseModel):
    """A settings section: unknown keys are refused, values are frozen, and each field's
    docstring is its description (``docs/settings.md`` is generated from them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def env_name(path: tuple[int | str, ...]) -> str:
    """The ``TRIBUNAL_*`` variable of a dotted settings path (list indexes dropped)."""
    return ENV_PREFIX + "__".join(str(p).upper() for p in path if not isinstance(p, int))
