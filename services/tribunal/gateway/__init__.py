"""The gateway: composes retrieval, ensemble, entailment, confidence and debate per request.

``Answer`` returns a KB answer verbatim only when the gateway's own checks pass
(every stage reply consistent and in range, the entry's stored verification
current, confidence at the trusted calibrator's threshold), and falls back (with
the reason recorded) on any doubt or any stage failure;
``Label`` runs the judges → debate → humans cascade. Every decision is written to
the append-only audit store. Stages are reached in-process, over gRPC or through
Ray Serve handles (:class:`StageTransport`), with the same pipeline code.
"""

from ._answer import ANSWER_STAGES, AnswerPipeline
from ._label import LabelPipeline
from ._label_modes import LABEL_MODE_STAGES, LabelMode, label_stages
from ._stages import (
    Deadline,
    FailureKind,
    StageError,
    StageTransport,
    call_stage,
    check_probability,
)
from ._trace import RequestTrace

__all__ = [
    "ANSWER_STAGES",
    "LABEL_MODE_STAGES",
    "AnswerPipeline",
    "Deadline",
    "FailureKind",
    "LabelMode",
    "LabelPipeline",
    "RequestTrace",
    "StageError",
    "StageTransport",
    "call_stage",
    "check_probability",
    "label_stages",
]
