"""The settings reference (``docs/settings.md``), generated from the field definitions.

``tribunal config docs > docs/settings.md`` writes it; a unit test keeps the committed
page equal to this output, so the reference cannot drift from the code.
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from ._base import env_name
from ._root import Settings

__all__ = ["SettingRow", "setting_rows", "settings_reference"]

_HEADER = """\
# Settings reference

Every setting of Tribunal, generated from the code by `tribunal config docs`
(do not edit by hand). How settings are loaded, and the shipped profiles, are described
in [configuration](configuration.md).

A setting is read from, highest precedence first: the environment variable in the
table, the profile YAML (`TRIBUNAL_PROFILE`, default `tiny`), the default below.
Nested names are joined by `__` in variables (`retrieval.max_top_k` is
`TRIBUNAL_RETRIEVAL__MAX_TOP_K`); lists and mappings are given as JSON
(`TRIBUNAL_ROLES__JUDGES='["llm_strong", "llm_weak"]'`). The defaults are the code's;
a profile may set others (`tribunal config show --profile tiny` prints the effective
values).

Limits are named one way throughout: `max_<things>_per_request` is the most items one
request may carry (more is RESOURCE_EXHAUSTED or INVALID_ARGUMENT),
`max_<field>_chars` the longest text accepted in a request field, `chunk_size_chars`
the size texts are split into, and `truncate_<field>_chars` where a text is cut before
it goes into a prompt.
"""


@dataclass(frozen=True)
class SettingRow:
    """One setting as the reference lists it."""

    section: str
    name: str
    env: str
    type: str
    default: str
    description: str


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        inner = " or ".join(_type_name(a) for a in present)
        return f"{inner} or null" if len(present) < len(args) else inner
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if annotation is Path:
        return "path"
    if annotation is SecretStr:
        return "secret string"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    return getattr(annotation, "__name__", str(annotation))


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _bounds(info: FieldInfo) -> str:
    """`` in [1, 100]`` for a bounded number, ``, length ≥ 1`` for a bounded list."""
    low: Any = None
    high: Any = None
    low_open = high_open = False
    min_length = max_length = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low, low_open = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high, high_open = item.lt, True
        elif isinstance(item, annotated_types.MinLen):
            min_length = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            max_length = item.max_length
    if low is not None and high is not None:
        return (
            f" in {'(' if low_open else '['}{_number(low)}, "
            f"{_number(high)}{')' if high_open else ']'}"
        )
    if low is not None:
        return f" {'>' if low_open else '≥'} {_number(low)}"
    if min_length is not None and min_length == max_length:
        return f", length {min_length}"
    if min_length:
        return f", length ≥ {min_length}"
    return ""


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, str) and not value:
        return '`""`'
    if isinstance(value, Path | str):
        return f"`{value}`"
    if isinstance(value, tuple | list):
        return "`[" + ", ".join(str(v) for v in value) + "]`" if value else "`[]`"
    if isinstance(value, dict):
        if not value:
            return "`{}`"
        return "`{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}`"
    if isinstance(value, int):
        return f"`{value}`"
    return f"`{value}`"


def _description(info: FieldInfo) -> str:
    text = " ".join((info.description or "").split())
    # Docstrings use reStructuredText literals; the page is Markdown.
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("|", "\\|")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model of a section field (``X`` or ``X | None``), else None."""
    candidates = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    if (
        len(candidates) == 1
        and isinstance(candidates[0], type)
        and issubclass(candidates[0], BaseModel)
    ):
        return candidates[0]
    return None


def _row(path: tuple[str, ...], info: FieldInfo, default: str, env: str) -> SettingRow:
    return SettingRow(
        section=path[0] if len(path) > 1 else "",
        name=".".join(path),
        env=env,
        type=_type_name(info.annotation) + _bounds(info),
        default=default,
        description=_description(info),
    )


def _walk(
    model: type[BaseModel], instance: BaseModel | None, path: tuple[str, ...]
) -> Iterator[SettingRow]:
    for name, info in model.model_fields.items():
        here = (*path, name)
        if instance is not None:
            default = getattr(instance, name)
        else:
            default = None if info.is_required() else info.get_default(call_default_factory=True)
        nested = _model_of(info.annotation)
        if nested is not None:
            # A section without a default instance (roles) lists its fields as required.
            yield from _walk(nested, default, here)
            continue
        args = get_args(info.annotation)
        if get_origin(info.annotation) is dict and _model_of(args[1]) is not None:
            # A map of models (``models``): one row per field of an entry.
            entry = _model_of(args[1])
            assert entry is not None
            for entry_name, entry_info in entry.model_fields.items():
                yield _row(
                    (*here, "<key>", entry_name),
                    entry_info,
                    "required" if entry_info.is_required() else _value(entry_info.default),
                    env_name(here),
                )
            continue
        shown = "required" if instance is None and info.is_required() else _value(default)
        yield _row(here, info, shown, env_name(here))


def setting_rows() -> list[SettingRow]:
    """Every setting, in declaration order, sections expanded."""
    return list(_walk(Settings, None, ()))


def settings_reference() -> str:
    """The Markdown page: one table per section."""
    sections: dict[str, list[SettingRow]] = {}
    for row in setting_rows():
        sections.setdefault(row.section, []).append(row)
    out = [_HEADER]
    for section, members in sections.items():
        if section:
            info = Settings.model_fields[section]
            out.append(f"\n## `{section}`\n\n{_description(info)}\n")
        else:
            out.append("\n## Top level\n\nThe profile, paths, the database, logging.\n")
        out.append("| Setting | Variable | Type | Default | Description |")
        out.append("|---|---|---|---|---|")
        for row in members:
            out.append(
                f"| `{row.name}` | `{row.env}` | {row.type} | {row.default} | {row.description} |"
            )
    return "\n".join(out) + "\n"
