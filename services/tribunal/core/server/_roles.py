"""Which role each RPC needs: one table for every ``tribunal.v1`` method.

Reading methods (and the gateway's asking ones) need ``query``; methods that change
the knowledge base need ``admin``. A method missing from the table needs ``admin``
(fail closed); a unit test keeps the table equal to the methods the protos declare.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._credentials import Role

__all__ = ["METHOD_ROLES", "required_role"]

_QUERY, _ADMIN = Role.QUERY, Role.ADMIN

METHOD_ROLES: Mapping[str, Role] = {
    "/tribunal.v1.GatewayService/Answer": _QUERY,
    "/tribunal.v1.GatewayService/Label": _QUERY,
    "/tribunal.v1.GatewayService/BatchLabel": _QUERY,
    "/tribunal.v1.RetrievalService/Search": _QUERY,
    "/tribunal.v1.RetrievalService/BatchSearch": _QUERY,
    "/tribunal.v1.RetrievalService/Stats": _QUERY,
    "/tribunal.v1.RetrievalService/Upsert": _ADMIN,
    "/tribunal.v1.RetrievalService/Delete": _ADMIN,
    "/tribunal.v1.RetrievalService/Sign": _ADMIN,
    "/tribunal.v1.EntailmentService/Check": _QUERY,
    "/tribunal.v1.EntailmentService/CheckQuotes": _QUERY,
    "/tribunal.v1.EnsembleService/Match": _QUERY,
    "/tribunal.v1.EnsembleService/BatchMatch": _QUERY,
    "/tribunal.v1.EnsembleService/JudgeRelevance": _QUERY,
    "/tribunal.v1.DebateService/Assess": _QUERY,
    "/tribunal.v1.DebateService/BatchAssess": _QUERY,
    "/tribunal.v1.ConfidenceService/Score": _QUERY,
    "/tribunal.v1.ConfidenceService/BatchScore": _QUERY,
}
"""``/package.Service/Method`` -> the role a credential needs to call it."""


def required_role(method: str) -> Role:
    """The role ``method`` (``/tribunal.v1.RetrievalService/Upsert``) needs; ``admin``
    for a method the table does not list."""
    return METHOD_ROLES.get(method, _ADMIN)
