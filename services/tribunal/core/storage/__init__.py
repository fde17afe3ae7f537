"""Persistent state: audit decisions and escalations (SQLAlchemy; SQLite or PostgreSQL).

db = Database(settings.database_url)
audit_id = db.append_decision(DecisionRecord(kind="answer", query=q, decision="ACCEPT"))
"""

from ._database import Database, DecisionRecord, EscalationRecord
from ._tables import AuditDecisionRow, Base, EscalationRow, KbChangeRow

__all__ = [
    "AuditDecisionRow",
    "Base",
    "Database",
    "DecisionRecord",
    "EscalationRecord",
    "EscalationRow",
    "KbChangeRow",
]
