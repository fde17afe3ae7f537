"""Schemas for JSON generation: what the model is told, how its answer is checked."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

import jsonschema
from pydantic import BaseModel, ValidationError

from .._errors import InvalidArgumentError

__all__ = ["SchemaLike", "SchemaValidator", "extract_json"]

T = TypeVar("T")
SchemaLike = type[BaseModel] | Mapping[str, Any]
"""A pydantic model class, or a JSON schema as a mapping."""

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (inside a code fence if there is one).

    Raises:
        ValueError: no JSON value could be parsed.
    """
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    decoder = json.JSONDecoder()
    for start, char in enumerate(candidate):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            return value
    raise ValueError("the answer contains no JSON object")


class SchemaValidator(Generic[T]):
    """Validates model answers against a pydantic model or a JSON schema."""

    def __init__(self, schema: SchemaLike) -> None:
        self._model: type[BaseModel] | None = None
        self._validator: jsonschema.protocols.Validator | None = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self._model = schema
            self.json_schema: dict[str, Any] = schema.model_json_schema()
            self.name = schema.__name__
        elif isinstance(schema, Mapping):
            self.json_schema = dict(schema)
            cls = jsonschema.validators.validator_for(self.json_schema)
            try:
                cls.check_schema(self.json_schema)
            except jsonschema.SchemaError as exc:
                raise InvalidArgumentError(
                    f"invalid JSON schema: {exc.message}", field="schema"
                ) from exc
            self._validator = cls(self.json_schema)
            self.name = str(self.json_schema.get("title") or "answer")
        else:
            raise InvalidArgumentError(
                "schema must be a pydantic model class or a JSON schema mapping", field="schema"
            )

    def instruction(self) -> str:
        """What the model is told about the answer's shape."""
        return (
            "Reply with one JSON value that matches this JSON schema, and nothing else "
            "(no explanation, no code fence):\n"
            + json.dumps(self.json_schema, separators=(",", ":"))
        )

    def validate(self, text: str) -> T:
        """The validated value parsed from ``text``.

        Raises:
            ValueError: what is wrong, phrased so that the model can be told.
        """
        value = extract_json(text)
        if self._model is not None:
            try:
                return cast(T, self._model.model_validate(value))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
                    for e in exc.errors()[:5]
                )
                raise ValueError(problems) from exc
        assert self._validator is not None
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            raise ValueError(
                "; ".join(
                    f"{'.'.join(str(p) for p in e.path) or 'value'}: {e.message}"
                    for e in errors[:5]
                )
            )
        return cast(T, value)
