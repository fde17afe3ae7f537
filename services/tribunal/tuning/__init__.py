"""Tuning a collection's matcher on its labelled traffic (``tribunal tune``).

The *train* part of the traffic teaches the KB (its queries become phrasings of
the entries that answer them, :mod:`._teach`); optionally the matcher's bi-encoder
is fine-tuned contrastively on them; its matching head is refitted on the *head*
part; the result is a versioned directory bound to the collection, which the feature matcher serves
and ``tribunal calibrate`` certifies on the held-out part only (:mod:`._split`
says why that keeps the certificate valid).

Errors: :class:`TooLittleDataError` (an ``InvalidArgumentError``: the traffic is too
small to help); loading a damaged or missing directory is a
``FailedPreconditionError``.
"""

from ..ensemble import TUNED_FORMAT, TunedMatcher, current_tuned_dir, tuned_embedder, tuned_root
from ._certify import certifiable_traffic
from ._pair_features import EntryTexts, PairFeatures, pair_features
from ._split import TuneSplit, query_key, split_for_tuning
from ._teach import TeachingPlan, plan_teaching
from ._tune import (
    TooLittleDataError,
    TuneConfig,
    TuneOutcome,
    check_enough,
    config_record,
    tune_matcher,
)

__all__ = [
    "TUNED_FORMAT",
    "EntryTexts",
    "PairFeatures",
    "TeachingPlan",
    "TooLittleDataError",
    "TuneConfig",
    "TuneOutcome",
    "TuneSplit",
    "TunedMatcher",
    "certifiable_traffic",
    "check_enough",
    "config_record",
    "current_tuned_dir",
    "pair_features",
    "plan_teaching",
    "query_key",
    "split_for_tuning",
    "tune_matcher",
    "tuned_embedder",
    "tuned_root",
]
