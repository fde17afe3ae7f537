"""A reviewer reruns the COVID FAQ's answer classes from the KB with the real embedder."""

from __future__ import annotations

import pytest
from tribunal.cli import main

from tests.conftest import REPO, SHARED

KB = SHARED / "data/covid-qa/faq_kb_en.jsonl"
CLASSES = REPO / "services/tribunal/artifacts/answer-classes/covid-qa-faq-en.json"


@pytest.mark.models
def test_recomputed_classes_equal_the_committed_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["answer-classes", "check", "--kb", str(KB), "--classes", str(CLASSES)]) == 0
    assert "the same 69 links and 19 classes" in capsys.readouterr().out
