"""Building the profile's debate from settings (used by the servicer, the Ray app, evals)."""

from __future__ import annotations

from tribunal.core import ConfigError, Settings
from tribunal.core.llm import Backend, shared_engine
from tribunal.entailment import QuoteChecker

from ._debate import DreamDebate

__all__ = ["build_debate"]


def build_debate(
    settings: Settings,
    *,
    agents: tuple[str, str] | None = None,
    adjudicator: str | None = None,
    backend: Backend | None = None,
) -> DreamDebate:
    """The debate of the profile: agents from ``roles.debate_agents`` (two model keys;
    two different keys make a heterogeneous debate), adjudicator from ``roles.adjudicator``.

    ``agents`` / ``adjudicator`` override the roles with other model keys of the profile.
    The adjudicator's model is loaded only when ``debate.adjudicate`` is on or a key is
    given; roles naming the same model share one engine (weights and prefix cache).
    """
    if settings.roles is None and (agents is None or adjudicator is None):
        raise ConfigError("the profile defines no roles (debate_agents, adjudicator)")
    first, second = agents or tuple(settings.roles.debate_agents)  # type: ignore[union-attr]
    options = settings.debate
    judge_key = adjudicator
    if judge_key is None and options.adjudicate:
        judge_key = settings.roles.adjudicator  # type: ignore[union-attr]
    engine_a = shared_engine(settings, first, backend=backend)
    engine_b = shared_engine(settings, second, backend=backend)
    return DreamDebate(
        (engine_a, engine_b),
        adjudicator=shared_engine(settings, judge_key, backend=backend) if judge_key else None,
        quote_checker=QuoteChecker(
            settings.entailment.quote_min_ratio, settings.entailment.quote_min_chars
        ),
        max_rounds=options.max_rounds,
        adjudicate=options.adjudicate,
        swap_stance_order=options.swap_stance_order,
        require_answers=options.require_answers,
        max_new_tokens=options.max_new_tokens,
        json_retries=options.json_retries,
        max_items_per_request=options.max_items_per_request,
        max_query_chars=options.max_query_chars,
        max_chunk_chars=options.max_chunk_chars,
        max_answers_per_item=options.max_answers_per_item,
        profile=settings.profile,
    )
