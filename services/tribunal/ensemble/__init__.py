"""Ensemble matching: several LLM judges decide whether a KB entry answers a query.

Judges (:class:`JudgePanel`) are the profile's LLMs, each with the RAL2M judge prompt
and its augmented variant (plus the entry's supporting chunk). Aggregators turn their
votes (optionally their P(yes)) and the query embedding into P(match):
:class:`MajorityVote`, :class:`WeightedVote`, :class:`NeuralGating` and RAL2M's
query-adaptive :class:`LatentEnsemble`. ``tribunal ensemble build-dataset|train|
evaluate|export-signals`` builds the labelled set, trains a versioned
:class:`EnsembleArtifact` and reports RAL2M's Tables 3 and 7 on it; the
:class:`EnsembleMatcher` serves it. The :class:`RelevanceJudge` (a logistic
regression over an LLM's P(yes) and an embedding cosine, from a fitted
:class:`RelevanceArtifact`) says whether a chunk answers a search query: the cheap
judges of ``Gateway.Label``. Framework-free: the gRPC adapter is
:mod:`.servicer`, the Ray Serve application :mod:`.app`.
"""

from ._artifact import AGGREGATORS, EnsembleArtifact
from ._base import Aggregator, EnsembleInputs, InputKind
from ._dataset import (
    MatchingData,
    MatchItem,
    build_items,
    judge_items,
    load_matching_data,
    read_items,
)
from ._judges import (
    Judge,
    JudgePanel,
    JudgeSpec,
    PanelOutput,
    best_chunk,
    judge_specs,
    render_fields,
)
from ._latent import LatentEnsemble
from ._majority import MajorityVote
from ._matcher import EnsembleMatcher, JudgeVerdict, MatchRequestItem, MatchResult
from ._neural import NeuralGating
from ._relevance import (
    RELEVANCE_FORMAT,
    RelevanceArtifact,
    RelevanceFeature,
    RelevanceItem,
    RelevanceJudge,
    RelevanceJudgeSlot,
    RelevanceVerdict,
    relevance_artifact_path,
)
from ._training import (
    SplitIndex,
    ablation,
    fit_vote_thresholds,
    make_aggregators,
    matching_metrics,
    split_data,
    summarise,
    train_artifact,
)
from ._weighted import WeightedVote

__all__ = [
    "AGGREGATORS",
    "RELEVANCE_FORMAT",
    "Aggregator",
    "EnsembleArtifact",
    "EnsembleInputs",
    "EnsembleMatcher",
    "InputKind",
    "Judge",
    "JudgePanel",
    "JudgeSpec",
    "JudgeVerdict",
    "LatentEnsemble",
    "MajorityVote",
    "MatchItem",
    "MatchRequestItem",
    "MatchResult",
    "MatchingData",
    "NeuralGating",
    "PanelOutput",
    "RelevanceArtifact",
    "RelevanceFeature",
    "RelevanceItem",
    "RelevanceJudge",
    "RelevanceJudgeSlot",
    "RelevanceVerdict",
    "SplitIndex",
    "WeightedVote",
    "ablation",
    "best_chunk",
    "build_items",
    "fit_vote_thresholds",
    "judge_items",
    "judge_specs",
    "load_matching_data",
    "make_aggregators",
    "matching_metrics",
    "read_items",
    "relevance_artifact_path",
    "render_fields",
    "split_data",
    "summarise",
    "train_artifact",
]
