"""LLM judges: one (model, prompt) pair each; a panel runs them batched and concurrently.

A judge reads P(yes) for "does this KB entry answer the query?" from one forward pass
(:meth:`tribunal.core.llm.LLMEngine.judge`). The tiny profile's three models, each with
the plain RAL2M prompt and the augmented one (plus the entry's supporting chunk), make
six judges. The panel groups the prompts of each model into one engine call (the
engine batches them and reuses their shared prefix), and runs the models in parallel
threads (the backends release the GIL while the model runs).

An augmented judge whose candidate has no supporting chunk (a KB entry without
passages, or an STS-B pair) has nothing to add: it returns its model's plain-prompt
verdict, and says so (its ``prompt`` is the plain prompt's id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import ConfigError, InvalidArgumentError
from ..core.llm import LLMEngine, Prompt, Usage
from ..kb import KbEntry
from ..prompts import PromptTemplate, get_prompt

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "Judge",
    "JudgePanel",
    "JudgeSpec",
    "PanelOutput",
    "best_chunk",
    "judge_specs",
    "render_fields",
]

_ELLIPSIS = " […]"
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class JudgeSpec:
    """Which model and prompt a judge uses; ``name`` is ``model_key/prompt_name``."""

    model_key: str
    prompt_id: str

    @property
    def template(self) -> PromptTemplate:
        return get_prompt(self.prompt_id)

    @property
    def name(self) -> str:
        return f"{self.model_key}/{self.template.name}"

    @property
    def augmented(self) -> bool:
        """Whether the prompt shows the supporting chunk."""
        return "chunk" in self.template.fields

    @classmethod
    def parse(cls, name: str, prompts: Sequence[str]) -> JudgeSpec:
        """The spec of judge ``model_key/prompt_name`` among the prompt ids ``prompts``."""
        model_key, _, prompt_name = name.partition("/")
        for prompt_id in prompts:
            if get_prompt(prompt_id).name == prompt_name:
                return cls(model_key, get_prompt(prompt_id).id)
        raise ConfigError(
            f"judge {name!r}: no prompt named {prompt_name!r} among {list(prompts)}",
            field="ensemble.judges",
        )


def judge_specs(settings: Settings, names: Sequence[str] | None = None) -> list[JudgeSpec]:
    """The profile's judges: every ``roles.judges`` model with every ensemble prompt.

    ``names`` (or ``ensemble.judges``) keeps only those judges, in that order.

    Raises:
        ConfigError: the profile has no judges, or a name is not one of its judges.
    """
    if settings.roles is None:
        raise ConfigError("the profile defines no roles.judges", field="roles.judges")
    prompts = [get_prompt(p).id for p in settings.ensemble.prompts]
    every = [JudgeSpec(model, prompt) for model in settings.roles.judges for prompt in prompts]
    wanted = names if names is not None else settings.ensemble.judges
    if wanted is None:
        return every
    by_name = {spec.name: spec for spec in every}
    out = []
    for name in wanted:
        if name not in by_name:
            raise ConfigError(
                f"judge {name!r} is not a judge of profile {settings.profile!r}; "
                f"known: {', '.join(by_name)}",
                field="ensemble.judges",
            )
        out.append(by_name[name])
    return out


def _cut(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked " […]"."""
    if len(text) <= limit:
        return text
    head = text[: limit - len(_ELLIPSIS)]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else head) + _ELLIPSIS


def best_chunk(query: str, entry: KbEntry) -> str | None:
    """The entry's supporting chunk sharing the most words with the query (first on ties)."""
    chunks = [c for c in entry.chunks if c.text.strip()]
    if not chunks:
        return None
    words = set(_WORD.findall(query.lower()))
    overlaps = [len(words & set(_WORD.findall(c.text.lower()))) for c in chunks]
    return chunks[overlaps.index(max(overlaps))].text


def render_fields(
    query: str, entry: KbEntry, *, truncate_answer_chars: int, truncate_chunk_chars: int
) -> tuple[dict[str, str], str | None]:
    """Prompt fields of the plain judge and the supporting chunk (None: the entry has none)."""
    fields = {
        "query": query,
        "question": entry.question,
        "answer": _cut(entry.answer, truncate_answer_chars),
    }
    chunk = best_chunk(query, entry)
    return fields, None if chunk is None else _cut(chunk, truncate_chunk_chars)


@dataclass(frozen=True)
class Judge:
    """A judge bound to its loaded engine."""

    spec: JudgeSpec
    engine: LLMEngine[Any]

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class PanelOutput:
    """Every judge's P(yes) on every pair (rows: pairs, columns: judges)."""

    p_yes: list[list[float]]
    prompts: list[list[str]]
    """Prompt id each verdict came from (the plain one for chunkless augmented judges)."""
    usage: Usage
    per_pair_tokens: list[int]
    """Prompt tokens spent on each pair, over all judges (shared prompts counted once)."""


class JudgePanel:
    """Judges that answer together: one engine call per model, the models in parallel."""

    def __init__(
        self,
        judges: Sequence[Judge],
        *,
        truncate_answer_chars: int = 600,
        truncate_chunk_chars: int = 300,
    ) -> None:
        if not judges:
            raise ConfigError("an ensemble needs at least one judge", field="ensemble.judges")
        self.judges = list(judges)
        self.truncate_answer_chars = truncate_answer_chars
        self.truncate_chunk_chars = truncate_chunk_chars
        self._pool = ThreadPoolExecutor(
            max_workers=len({id(j.engine) for j in judges}), thread_name_prefix="judge"
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, names: Sequence[str] | None = None, *, backend: Any = None
    ) -> JudgePanel:
        """The profile's judges (or ``names``), each model loaded once (shared engines)."""
        from ..core.llm import shared_engine

        specs = judge_specs(settings, names)
        return cls(
            [
                Judge(spec, shared_engine(settings, spec.model_key, backend=backend))
                for spec in specs
            ],
            truncate_answer_chars=settings.ensemble.truncate_answer_chars,
            truncate_chunk_chars=settings.ensemble.truncate_chunk_chars,
        )

    @property
    def names(self) -> list[str]:
        return [j.name for j in self.judges]

    def prompts_for(self, judge: Judge, query: str, entry: KbEntry) -> tuple[Prompt, str]:
        """The prompt ``judge`` sees for one pair, and its template id."""
        fields, chunk = render_fields(
            query,
            entry,
            truncate_answer_chars=self.truncate_answer_chars,
            truncate_chunk_chars=self.truncate_chunk_chars,
        )
        template = judge.spec.template
        if judge.spec.augmented:
            if chunk is None:
                # Nothing to add: the augmented judge is its model's plain judge here.
                template = get_prompt("matching/ral2m@1")
                fields = {k: v for k, v in fields.items() if k in template.fields}
            else:
                fields = {**fields, "chunk": chunk}
        return template.render(judge.engine, **fields), template.id

    def judge(self, pairs: Sequence[tuple[str, KbEntry]]) -> PanelOutput:
        """Every judge on every ``(query, entry)`` pair."""
        for index, (query, entry) in enumerate(pairs):
            if not query.strip():
                raise InvalidArgumentError("query must be non-empty", field=f"items[{index}].query")
            if not entry.question.strip() or not entry.answer.strip():
                raise InvalidArgumentError(
                    "candidate needs a non-empty question and answer",
                    field=f"items[{index}].candidate",
                )
        by_engine: dict[int, list[int]] = {}
        for column, judge in enumerate(self.judges):
            by_engine.setdefault(id(judge.engine), []).append(column)
        p_yes = [[0.0] * len(self.judges) for _ in pairs]
        prompt_ids = [[""] * len(self.judges) for _ in pairs]
        tokens = [0] * len(pairs)

        def run_model(columns: list[int]) -> Usage:
            engine = self.judges[columns[0]].engine
            unique: dict[Prompt, int] = {}
            where: list[tuple[int, int, int]] = []  # (row, column, unique index)
            for row, (query, entry) in enumerate(pairs):
                for column in columns:
                    prompt, prompt_id = self.prompts_for(self.judges[column], query, entry)
                    prompt_ids[row][column] = prompt_id
                    where.append((row, column, unique.setdefault(prompt, len(unique))))
            if not unique:
                return Usage()
            batch = engine.judge(list(unique))
            owner: dict[int, int] = {}
            for row, column, index in where:
                p_yes[row][column] = batch.p_yes[index]
                owner.setdefault(index, row)
            for index, prompt in enumerate(unique):
                tokens[owner[index]] += engine.count_tokens(prompt)
            return batch.usage

        usages = list(self._pool.map(run_model, by_engine.values()))
        total = Usage()
        for usage in usages:
            total += usage
        return PanelOutput(p_yes, prompt_ids, total, tokens)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
