"""Ensemble matching: several LLM judges decide whether a KB entry answers a query.

Judges (:class:`JudgePanel`) are the profile's LLMs, each with the RAL2M judge prompt
and its augmented variant (plus the entry's supporting chunk). Aggregators turn their
votes (optionally their P(yes)) and the query embedding into P(match):
:class:`MajorityVote`, :class:`WeightedVote`, :class:`NeuralGating` and RAL2M's
query-adaptive :class:`LatentEnsemble`. ``tribunal ensemble train|evaluate|
export-signals`` trains a versioned :class:`EnsembleArtifact` on a labelled matching
set (:func:`load_matching_data`) and reports RAL2M's Tables 3 and 7 on it; the
:class:`EnsembleMatcher` serves it. The :class:`FeatureMatcher` (``ensemble.matcher:
features``) answers the same calls with no LLM: a logistic regression over embedding
cosines and a fuzzy ratio (:func:`match_feature_values`) from a fitted
:class:`MatchFeaturesArtifact`; :func:`load_matcher` picks one. The
:class:`RelevanceJudge` (a logistic regression over an LLM's P(yes) and an embedding
cosine, from a fitted :class:`RelevanceArtifact`) says whether a chunk answers a
search query: the cheap judges of ``Gateway.Label``. Framework-free: the gRPC adapter is
:mod:`.servicer`, the Ray Serve application :mod:`.app`.
"""

from ._artifact import EnsembleArtifact
from ._dataset import MatchItem, judgment_path, load_matching_data, read_items, read_judgments
from ._feature_artifact import FeatureEmbedder, MatchFeaturesArtifact, features_path
from ._feature_matcher import (
    FeatureMatcher,
    Matcher,
    matcher_model_keys,
    precompute_entry_vectors,
    served_feature_matcher,
    tuned_matcher_dir,
)
from ._judges import JudgePanel, judge_specs
from ._match_features import MATCH_FEATURES, match_feature_values
from ._matcher import EnsembleMatcher, MatchRequestItem
from ._relevance import RelevanceArtifact, RelevanceItem, RelevanceJudge, relevance_artifact_path
from ._training import ablation, split_data, summarise, train_artifact
from ._tuned_artifact import TUNED_FORMAT, TunedMatcher, current_tuned_dir, tuned_root
from ._tuned_serving import (
    tuned_embedder,
    tuned_model_name,
    tuned_retrieval_embedder,
)

__all__ = [
    "MATCH_FEATURES",
    "TUNED_FORMAT",
    "EnsembleArtifact",
    "EnsembleMatcher",
    "FeatureEmbedder",
    "FeatureMatcher",
    "JudgePanel",
    "MatchFeaturesArtifact",
    "MatchItem",
    "MatchRequestItem",
    "Matcher",
    "RelevanceArtifact",
    "RelevanceItem",
    "RelevanceJudge",
    "TunedMatcher",
    "ablation",
    "current_tuned_dir",
    "features_path",
    "judge_specs",
    "judgment_path",
    "load_matching_data",
    "match_feature_values",
    "matcher_model_keys",
    "precompute_entry_vectors",
    "read_items",
    "read_judgments",
    "relevance_artifact_path",
    "served_feature_matcher",
    "split_data",
    "summarise",
    "train_artifact",
    "tuned_embedder",
    "tuned_matcher_dir",
    "tuned_model_name",
    "tuned_retrieval_embedder",
    "tuned_root",
]
