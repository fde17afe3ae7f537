"""The KB writer's signatures: key files, rotation, and what a reader refuses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tribunal.retrieval import (
    KbSigner,
    SignatureError,
    SignedRecord,
    TrustedKeys,
    canonical_record,
    head_record,
)
from tribunal.retrieval._signing import load_or_create_signer

RECORD = canonical_record(head_record("covid", 7, "kb-0123456789abcdef", False))


def test_the_first_use_makes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    private, trusted = tmp_path / "keys" / "kb-signing.key", tmp_path / "keys" / "trusted"
    signer, created = load_or_create_signer(private, trusted)
    assert created
    assert private.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in trusted.iterdir()] == [f"{signer.key_id}.pub"]
    again, created = load_or_create_signer(private, trusted)
    assert (again.key_id, created) == (signer.key_id, False)
    assert TrustedKeys(trusted).open(again.sign(RECORD))["kb_version"] == 7


def test_a_rotation_keeps_the_old_key_trusted_until_it_is_removed(tmp_path: Path) -> None:
    private, trusted = tmp_path / "kb-signing.key", tmp_path / "trusted"
    old, _ = load_or_create_signer(private, trusted)
    new, created = load_or_create_signer(private, trusted, rotate=True)
    assert created
    assert new.key_id != old.key_id
    assert (tmp_path / f"kb-signing.key.{old.key_id}.retired").is_file()
    keys = TrustedKeys(trusted)
    assert keys.key_ids() == sorted([old.key_id, new.key_id])
    assert keys.open(old.sign(RECORD)) == keys.open(new.sign(RECORD))
    (trusted / f"{old.key_id}.pub").unlink()
    time.sleep(1.05)  # the folder is looked at again at most once a second
    with pytest.raises(SignatureError) as retired:
        keys.open(old.sign(RECORD))
    assert not retired.value.forged
    assert "not trusted here" in str(retired.value)


@pytest.mark.parametrize(
    ("name", "forged"),
    [
        ("unsigned", False),
        ("unknown-key-id", False),
        ("another-key-under-the-trusted-id", True),
        ("truncated-signature", True),
        ("record-changed", True),
        ("record-not-canonical", True),
        ("not-a-record", True),
    ],
)
def test_a_reader_refuses_what_the_trusted_key_did_not_sign(name: str, forged: bool) -> None:
    writer, attacker = KbSigner.generate(), KbSigner.generate()
    keys = TrustedKeys.of(writer.public_key)
    good = writer.sign(RECORD)
    changed = RECORD.replace(b'"kb_version":7', b'"kb_version":8')
    spaced = json.dumps(json.loads(RECORD), indent=1).encode()
    bad = {
        "unsigned": SignedRecord(RECORD),
        "unknown-key-id": attacker.sign(RECORD),
        "another-key-under-the-trusted-id": SignedRecord(
            RECORD, writer.key_id, attacker.sign(RECORD).signature
        ),
        "truncated-signature": SignedRecord(RECORD, writer.key_id, good.signature[:32]),
        "record-changed": SignedRecord(changed, writer.key_id, good.signature),
        "record-not-canonical": writer.sign(spaced),
        "not-a-record": writer.sign(b'{"kind":"something else"}'),
    }[name]
    # The good record checked first: a reader remembers the signatures it checked, and
    # that memory must not let a record through that differs in any byte or key.
    assert keys.open(good)["collection"] == "covid"
    for _ in range(2):
        with pytest.raises(SignatureError) as refused:
            keys.open(bad)
        assert refused.value.forged is forged
    assert keys.open(good)["collection"] == "covid"
