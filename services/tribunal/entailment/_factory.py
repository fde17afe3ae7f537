"""Building the profile's cascade from settings (used by the servicer and the Ray app)."""

from __future__ import annotations

from ..core import ConfigError, Settings, resolve_device
from ..core.llm import shared_engine
from ..core.models import ModelStore, get_artifact
from ._cascade import EntailmentCascade
from ._checkers import LexicalOverlapChecker, NliCrossEncoderChecker, SupportChecker
from ._llm_checker import LlmSupportChecker
from ._quote import QuoteChecker

__all__ = ["build_cascade", "build_checker"]


def build_checker(settings: Settings, role: str) -> SupportChecker:
    """The checker for role ``entailment_fast`` or ``entailment_strong`` of the profile.

    The model's ``kind`` picks the backend: ``llm`` → the yes/no checker through the
    LLM engine; ``nli`` → the NLI cross-encoder.
    """
    assert settings.roles is not None, "the profile defines no roles"
    key = getattr(settings.roles, role)
    spec = settings.model_spec(key)
    if spec.kind == "llm":
        return LlmSupportChecker(shared_engine(settings, key))
    if spec.kind == "nli":
        if spec.artifact is not None:
            path = ModelStore(settings.model_dir, progress=False).require(
                get_artifact(spec.artifact)
            )
            source = str(path)
        else:
            source = str(spec.hf_id)
        return NliCrossEncoderChecker(source, device=resolve_device(settings))
    raise ConfigError(
        f"roles.{role} names model {key!r} of kind {spec.kind!r}; an entailment checker must "
        "be an 'llm' or 'nli' model (or 'lexical')",
        field=f"roles.{role}",
    )


def build_cascade(settings: Settings) -> EntailmentCascade:
    """The two-stage cascade the settings describe (one stage when ``strong`` is off)."""
    options = settings.entailment
    fast = (
        LexicalOverlapChecker()
        if options.fast_backend == "lexical"
        else build_checker(settings, "entailment_fast")
    )
    strong = build_checker(settings, "entailment_strong") if options.two_stage else None
    return EntailmentCascade(
        fast,
        strong,
        uncertain_band=(options.uncertain_low, options.uncertain_high),
        entail_threshold=options.entail_threshold,
        contradict_threshold=options.contradict_threshold,
        chunk_size_chars=options.chunk_size_chars,
        quote_checker=QuoteChecker(
            options.quote_min_ratio,
            options.quote_min_chars,
            max_quote_chars=options.max_quote_chars,
        ),
        max_pairs_per_request=options.max_pairs_per_request,
        max_premise_chars=options.max_premise_chars,
        max_hypothesis_chars=options.max_hypothesis_chars,
    )
