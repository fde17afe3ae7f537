"""Entailment: does a passage really say what a claim (answer, argument) says?

Stage 0 checks quotes (:class:`QuoteChecker`); stage 1 runs a fast checker on
every pair and stage 2 a strong checker on the uncertain ones
(:class:`EntailmentCascade`, after BITEM); long premises are chunked and the
max support over chunks is taken (MiniCheck). Checkers: the LLM yes/no checker
(:class:`LlmSupportChecker`), an NLI cross-encoder
(:class:`NliCrossEncoderChecker`), a lexical prefilter. Framework-free: the
gRPC adapter is :mod:`.servicer`, the Ray Serve application :mod:`.app`.
"""

from ._cascade import (
    CheckStage,
    EntailmentCascade,
    EntailmentLabel,
    EntailmentVerdict,
    PairToCheck,
    PremiseChunk,
    split_premise,
)
from ._checkers import LexicalOverlapChecker, NliCrossEncoderChecker, SupportChecker, SupportScore
from ._factory import build_cascade, build_checker
from ._llm_checker import LlmSupportChecker
from ._quote import QuoteChecker, QuoteMatch, normalise_with_offsets
from ._version import VERIFICATION_METHOD, checker_version

__all__ = [
    "VERIFICATION_METHOD",
    "CheckStage",
    "EntailmentCascade",
    "EntailmentLabel",
    "EntailmentVerdict",
    "LexicalOverlapChecker",
    "LlmSupportChecker",
    "NliCrossEncoderChecker",
    "PairToCheck",
    "PremiseChunk",
    "QuoteChecker",
    "QuoteMatch",
    "SupportChecker",
    "SupportScore",
    "build_cascade",
    "build_checker",
    "checker_version",
    "normalise_with_offsets",
    "split_premise",
]
