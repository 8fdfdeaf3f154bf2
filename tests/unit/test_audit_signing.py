"""Ed25519 checkpoint signatures: what is signed, what breaks a signature, which keys are refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from memwarden.audit_signing import CheckpointSigner, CheckpointVerifier, checkpoint_message

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def signer() -> CheckpointSigner:
    return CheckpointSigner.from_base64(CheckpointSigner.generate_base64())


def test_a_signed_checkpoint_verifies_under_its_public_key_only() -> None:
    s = signer()
    cp = s.sign(seq=10, head_hash="ab" * 32, event_count=10, prev_seq=5, at=AT)
    assert cp.key_id == s.key_id and len(base64.b64decode(cp.signature)) == 64
    assert CheckpointVerifier.from_base64([s.public_base64()]).check(cp) is None
    other = signer()
    assert CheckpointVerifier.from_base64([other.public_base64()]).check(cp) == "checkpoint_unknown_key"
    # rotation: an old public key configured next to the new one still verifies old checkpoints
    assert CheckpointVerifier.from_base64([other.public_base64(), s.public_base64()]).check(cp) is None


@pytest.mark.parametrize(
    "change",
    [
        {"seq": 11},
        {"head_hash": "cd" * 32},
        {"event_count": 9},
        {"prev_seq": 0},
        {"at": AT + timedelta(microseconds=1)},
    ],
)
def test_changing_any_signed_field_breaks_the_signature(change: dict[str, object]) -> None:
    s = signer()
    cp = s.sign(seq=10, head_hash="ab" * 32, event_count=10, prev_seq=5, at=AT)
    forged = cp.model_copy(update=change)
    assert CheckpointVerifier.from_base64([s.public_base64()]).check(forged) == "checkpoint_signature_invalid"


def test_the_signed_message_is_canonical_and_names_the_key() -> None:
    message = checkpoint_message(seq=1, head_hash="00", event_count=1, prev_seq=0, at=AT, kid="k1")
    assert message == (
        b'{"at":"2026-12-01T09:00:00.000000Z","event_count":1,"head_hash":"00","key_id":"k1","prev_seq":0,"seq":1,"v":1}'
    )


@pytest.mark.parametrize("bad", ["not base64!", base64.b64encode(b"short").decode()])
def test_bad_keys_are_refused_with_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="audit signing key"):
        CheckpointSigner.from_base64(bad)
    with pytest.raises(ValueError, match="audit verify key"):
        CheckpointVerifier.from_base64([bad])
