"""A connection's SASL life: handshake, rounds, failure delay, KIP-368 re-authentication,
driven by kafka-python's SCRAM client code."""

from __future__ import annotations

import logging

import pytest
from kafka.net.sasl.scram import SaslMechanismScram

from odradek.protocol.errors import ErrorCode
from odradek.security.sasl import SaslMechanisms
from odradek.security.sasl.scram import ScramCredential, make_credential
from odradek.security.sasl.session import SaslSession

M = "SCRAM-SHA-512"
CRED = make_credential(M, "pw-alice", 4096)
MECHS = SaslMechanisms.from_config({"sasl.enabled.mechanisms": M}, "SASL_SSL",
                                   lambda m, u: CRED if u == "alice" else None)


def login(session: SaslSession, user: str, password: str, now: int) -> list[object]:
    assert session.handshake(M).error is ErrorCode.none
    client = SaslMechanismScram(sasl_plain_username=user, sasl_plain_password=password,
                                sasl_mechanism=M)
    results = []
    while not client.is_done():
        r = session.authenticate(client.auth_bytes(), now)
        results.append(r)
        if r.error is not ErrorCode.none:
            break
        client.receive(r.auth_bytes)
    return results


def test_only_apiversions_and_handshake_before_authentication() -> None:
    s = SaslSession(MECHS)
    assert s.allows(18, 0) and s.allows(17, 0)
    assert not s.allows(0, 0) and not s.allows(36, 0)
    login(s, "alice", "pw-alice", 0)
    assert s.authenticated and str(s.principal) == "User:alice" and s.allows(0, 10**12)


def test_unknown_mechanism_and_out_of_order_messages() -> None:
    s = SaslSession(MECHS)
    r = s.handshake("PLAIN")
    assert r.error is ErrorCode.unsupported_sasl_mechanism and r.mechanisms == [M]
    assert s.authenticate(b"x", 0).error is ErrorCode.illegal_sasl_state
    assert s.handshake(M).error is ErrorCode.none
    assert s.handshake(M).error is ErrorCode.illegal_sasl_state  # a second handshake


def test_failed_login_is_delayed_closed_and_logged_without_the_password(
        caplog: pytest.LogCaptureFixture) -> None:
    s = SaslSession(MECHS, failed_delay_ms=100, peer="127.0.0.1:5555")
    with caplog.at_level(logging.INFO, logger="odradek.security.sasl"):
        *_, last = login(s, "alice", "not-the-password", 0)
    assert last.error is ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
    assert last.close_after_ms == 100  # type: ignore[attr-defined]
    assert "Failed authentication with 127.0.0.1:5555" in caplog.text
    assert "not-the-password" not in caplog.text and not s.authenticated


def test_reauthentication_keeps_the_principal_and_expires_sessions() -> None:
    s = SaslSession(MECHS, reauth_ms=60_000)
    *_, done = login(s, "alice", "pw-alice", 1_000)
    assert done.session_lifetime_ms == 60_000  # type: ignore[attr-defined]
    assert s.allows(0, 60_999) and not s.allows(0, 61_000)
    *_, again = login(s, "alice", "pw-alice", 61_000)
    assert again.error is ErrorCode.none and s.allows(0, 61_001)  # type: ignore[attr-defined]


def test_reauthentication_as_someone_else_is_refused() -> None:
    creds: dict[str, ScramCredential] = {"alice": CRED, "bob": make_credential(M, "pw-bob")}
    mechs = SaslMechanisms.from_config({"sasl.enabled.mechanisms": M}, "X",
                                       lambda m, u: creds.get(u))
    s = SaslSession(mechs, reauth_ms=1000)
    login(s, "alice", "pw-alice", 0)
    *_, last = login(s, "bob", "pw-bob", 500)
    assert last.error is ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
    assert "Cannot change principals" in (last.error_message or "")  # type: ignore[attr-defined]
    assert str(s.principal) == "User:alice"
