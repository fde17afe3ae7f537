"""One typed settings object: a YAML model profile plus ``TRIBUNAL_*`` overrides.

Each section (``server``, ``llm``, ``retrieval``, ``entailment``, ``ensemble``,
``confidence``, ``debate``, ``gateway``) is a model in its own module; :class:`Settings`
composes them. :func:`load_settings` reads a profile and the environment, and
:func:`settings_reference` renders ``docs/settings.md`` from the fields' docstrings.
"""

from ._audit import AuditSettings
from ._choices import (
    AGGREGATOR_NAMES,
    CALIBRATOR_KINDS,
    DEFAULT_RISK_METHOD,
    LABEL_MODES,
    PLAN_CALIBRATOR_KINDS,
    RISK_METHOD_NAMES,
    AggregatorName,
    CalibratorKind,
    LabelModeName,
    PlanCalibratorKind,
    RiskMethod,
)
from ._confidence import ConfidenceSettings
from ._debate import DebateSettings
from ._deployment import DeploymentSettings
from ._ensemble import EnsembleSettings
from ._entailment import EntailmentSettings
from ._gateway import GatewaySettings
from ._llm import LLMSettings
from ._models import ModelSpec, RoleSettings
from ._profiles import available_profiles, load_settings, resolve_profile_path
from ._reference import settings_reference
from ._retrieval import RetrievalSettings
from ._root import Settings
from ._server import ServerSettings

__all__ = [
    "AGGREGATOR_NAMES",
    "CALIBRATOR_KINDS",
    "DEFAULT_RISK_METHOD",
    "LABEL_MODES",
    "PLAN_CALIBRATOR_KINDS",
    "RISK_METHOD_NAMES",
    "AggregatorName",
    "AuditSettings",
    "CalibratorKind",
    "ConfidenceSettings",
    "DebateSettings",
    "DeploymentSettings",
    "EnsembleSettings",
    "EntailmentSettings",
    "GatewaySettings",
    "LLMSettings",
    "LabelModeName",
    "ModelSpec",
    "PlanCalibratorKind",
    "RetrievalSettings",
    "RiskMethod",
    "RoleSettings",
    "ServerSettings",
    "Settings",
    "available_profiles",
    "load_settings",
    "resolve_profile_path",
    "settings_reference",
]
