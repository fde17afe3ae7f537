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
from ._checks import AnswerPolicy
from ._label import LabelPipeline
from ._label_modes import LabelMode, label_stages
from ._local_transport import LocalTransport
from ._stages import StageError, StageTransport, call_stage
from ._wiring import build_pipelines, connect_stages, open_audit_store, serve_stages

__all__ = [
    "ANSWER_STAGES",
    "AnswerPipeline",
    "AnswerPolicy",
    "LabelMode",
    "LabelPipeline",
    "LocalTransport",
    "StageError",
    "StageTransport",
    "build_pipelines",
    "call_stage",
    "connect_stages",
    "label_stages",
    "open_audit_store",
    "serve_stages",
]
