"""The /me page's pure parts: CSRF tokens tied to one session, and the notices chosen from codes."""

from __future__ import annotations

from pathlib import Path

from api.me import session as sessions
from api.me.labels import STATUSES, notice_for, status_group
from memwarden.config import Settings
from memwarden.identity import Principal, Role
from memwarden.records import Status


def _settings(tmp_path: Path, secret: str = "s" * 32) -> Settings:
    return Settings(data_dir=tmp_path, auth_secret=secret)


def _session(token: str) -> sessions.Session:
    return sessions.Session(Principal(tenant="t", sub="alice", role=Role.USER), credential=token, from_cookie=True)


def test_a_csrf_token_is_valid_for_its_own_session_only(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    one, two = _session("token-one"), _session("token-two")
    token = sessions.csrf_token(settings, one)
    assert sessions.check_csrf(settings, one, token)
    assert not sessions.check_csrf(settings, two, token)
    assert not sessions.check_csrf(settings, one, None)
    assert not sessions.check_csrf(settings, one, "")
    assert not sessions.check_csrf(settings, one, token[:-1] + ("A" if token[-1] != "A" else "B"))
    # another deployment's secret gives another token for the very same session
    other = _settings(tmp_path, secret="t" * 32)
    assert not sessions.check_csrf(other, one, token)
    # the sign-in token is a different purpose: it never passes as a session's token
    assert sessions.signin_token(settings, "token-one") != token


def test_notices_come_from_codes_and_every_status_has_a_label() -> None:
    assert notice_for(None, None, None) is None
    assert notice_for("unknown", None, None) is None
    updated = notice_for("edit", "UPDATE", "slot_value_changed")
    assert updated is not None and updated.kind == "success" and "kept as history" in updated.text
    refused = notice_for("edit", "REJECT", "secret_detected")
    assert refused is not None and refused.kind == "error" and "never stored" in refused.text
    waiting = notice_for("edit", "PENDING", "staged_behaviour_change")
    assert waiting is not None and "confirmation" in waiting.text
    off = notice_for("switched_off", None, None)
    assert off is not None and "Nothing was deleted" in off.text
    problem = notice_for("problem", None, "not_live")
    assert problem is not None and problem.kind == "error"
    assert set(STATUSES) == {s.value for s in Status}
    assert [status_group(s) for s in ("pending", "active", "stale", "superseded", "purged")] == [
        "pending",
        "live",
        "live",
        "past",
        "past",
    ]
