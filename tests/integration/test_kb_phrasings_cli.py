"""``tribunal kb phrasings list|approve|reject|export`` on a real KB (MiniLM) and the
embedded store: what an admin runs after annotators linked queries on the review page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.confidence import read_traffic
from tribunal.core import load_settings
from tribunal.core.storage import Database, DecisionRecord
from tribunal.kb import entry_sha256
from tribunal.retrieval import KnowledgeBase, PhrasingLinks, parse_record

pytestmark = pytest.mark.models

KB = [
    {
        "id": "card-lost",
        "question": "I lost my card",
        "questions": ["My bank card was stolen"],
        "answer": "Freeze the card in the app, then order a replacement.",
    },
    {"id": "pin", "question": "How do I change my PIN?", "answer": "At any cash machine."},
]


def test_an_admin_approves_rejects_and_exports_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb.jsonl"
    kb.write_text("".join(json.dumps(row) + "\n" for row in KB))
    assert main(["kb", "ingest", str(kb), "--collection", "bank", "--skip-match-vectors"]) == 0
    assert "upserted 2 entries (2 chunks, 1 more phrasings) into 'bank'" in capsys.readouterr().out
    settings = load_settings()
    db = Database(settings.database_url)
    links = PhrasingLinks(db, max_query_chars=settings.retrieval.max_question_chars)
    ids = []
    for query, entry in [("someone nicked my debit card", "card-lost"), ("wallet gone", "pin")]:
        audit_id = db.append_decision(
            DecisionRecord(kind="answer", query=query, decision="FALLBACK", collection="bank")
        )
        ids.append(links.propose("rita", audit_id=audit_id, entry_id=entry)[0].id)

    assert main(["kb", "phrasings", "list", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(x["id"], x["status"]) for x in listed] == [(ids[0], "pending"), (ids[1], "pending")]
    argv = ["kb", "phrasings", "approve", ids[0], "--skip-match-vectors"]
    assert main(argv) == 0
    assert "is a phrasing of bank/card-lost" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # --reason is required
        main(["kb", "phrasings", "reject", ids[1]])
    capsys.readouterr()
    assert main(["kb", "phrasings", "reject", ids[1], "--reason", "not a PIN question"]) == 0
    assert main(["kb", "phrasings", "approve", ids[1]]) == 2  # decided already
    assert "was rejected by cli:" in capsys.readouterr().err

    assert main(["kb", "search", "bank", "someone nicked my debit card", "--json"]) == 0
    top = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (top["id"], top["matched"], top["matched_question"]) == (
        "card-lost",
        "question:2",
        "someone nicked my debit card",
    )
    # The approved phrasing is part of a signed entry: the gateway keeps serving it.
    kb_after = KnowledgeBase.from_settings(settings)
    try:
        entry = kb_after.collection("bank").entries(["card-lost"])["card-lost"]
        signed = kb_after.collection("bank").store.signatures(["card-lost"])["card-lost"]
        assert signed.signature
        assert parse_record(signed.record)["entry_sha256"] == entry_sha256(entry)
        assert "someone nicked my debit card" in entry.questions
    finally:
        kb_after.close()
    assert main(["kb", "history", "bank", "--entry", "card-lost", "--json"]) == 0
    change = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert change["detail"]["phrasing_link"] == ids[0]
    assert change["actor"].startswith("cli:")

    out = tmp_path / "learned.jsonl"
    assert main(["kb", "phrasings", "export", "--collection", "bank", "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [
        {"query": "someone nicked my debit card", "collection": "bank", "answers": ["card-lost"]}
    ]
    assert [sorted(q.answers) for q in read_traffic(out).queries] == [["card-lost"]]
    db.close()
