"""The entailment checker's version: a digest of everything that decides a verdict.

The retrieval service stores it with each KB entry's verification and the gateway
computes it from its own settings; a verification is current while the two agree.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["VERIFICATION_METHOD", "checker_version"]

VERIFICATION_METHOD = "claims-x-chunks-max@1"
"""How an answer is checked (claims = sentences; each needs one entailing chunk). Part of
the checker version: a change of method re-verifies every entry."""


def checker_version(settings: Settings) -> str:
    """``entail-<12 hex>``: a digest of everything that decides a verification.

    The checker models (with the LLM backend that runs them), the entailment prompt,
    the cascade's band and thresholds, the premise chunk size and
    :data:`VERIFICATION_METHOD`. The retrieval service stores it with each verdict
    and the gateway computes it from its own settings: a verification is current
    while the two agree.
    """
    options = settings.entailment

    def model(role: str) -> str:
        if settings.roles is None:
            return role
        key = getattr(settings.roles, role)
        spec = settings.model_spec(key)
        return f"{spec.kind}:{spec.artifact or spec.hf_id or key}"

    from ..prompts import get_prompt

    described: dict[str, Any] = {
        "method": VERIFICATION_METHOD,
        "fast": (
            "lexical-overlap" if options.fast_backend == "lexical" else model("entailment_fast")
        ),
        "strong": model("entailment_strong") if options.two_stage else None,
        "prompt": get_prompt("entailment").id,
        "llm_backend": settings.llm_backend,
        "band": [options.uncertain_low, options.uncertain_high],
        "entail_threshold": options.entail_threshold,
        "contradict_threshold": options.contradict_threshold,
        "chunk_chars": options.chunk_size_chars,
    }
    canonical = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return f"entail-{hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:12]}"
