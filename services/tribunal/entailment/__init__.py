"""Entailment: does a passage really say what a claim (answer, argument) says?

Stage 0 checks quotes (:class:`QuoteChecker`); stage 1 runs a fast checker on
every pair and stage 2 a strong checker on the uncertain ones
(:class:`EntailmentCascade`, after BITEM); long premises are chunked and the
max support over chunks is taken (MiniCheck). Checkers: the LLM yes/no checker
(:class:`LlmSupportChecker`), an NLI cross-encoder
(:class:`NliCrossEncoderChecker`), a lexical prefilter. Framework-free: the
gRPC adapter is :mod:`.servicer`, the Ray Serve application :mod:`.app`.
"""

from ._cascade import EntailmentCascade, EntailmentLabel, PairToCheck, split_premise
from ._checkers import SupportScore
from ._factory import build_cascade, build_checker
from ._quote import QuoteChecker
from ._version import VERIFICATION_METHOD, checker_version

__all__ = [
    "VERIFICATION_METHOD",
    "EntailmentCascade",
    "EntailmentLabel",
    "PairToCheck",
    "QuoteChecker",
    "SupportScore",
    "build_cascade",
    "build_checker",
    "checker_version",
    "split_premise",
]
