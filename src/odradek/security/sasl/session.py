"""One connection's SASL life, sans-IO: SaslHandshake → SaslAuthenticate rounds →
authenticated (KIP-152), and re-authentication (KIP-368). After a SaslHandshake v0 the
tokens travel as raw size-prefixed frames instead of SaslAuthenticate requests
(`raw_tokens`), as Kafka serves clients older than KIP-152 — and librdkafka up to 2.x
only enables SASL at all when the broker advertises that version.

The connection hands each SaslHandshake / SaslAuthenticate request body here and sends
back what it returns; it asks `allows(api_key)` before any other request. Kafka's rules:
before authentication only ApiVersions and SaslHandshake (then SaslAuthenticate) are
served, anything else is ILLEGAL_SASL_STATE and the connection closes; a failed login is
answered after `connection.failed.authentication.delay.ms` and then the connection
closes; `session_lifetime_ms` is what SaslAuthenticate v1+ reports when
`connections.max.reauth.ms` is set (capped by the credential's own expiry).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import SaslMechanisms
from odradek.security.sasl.base import IllegalSaslState, SaslFailure, SaslServer

log = logging.getLogger("odradek.security.sasl")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


@dataclass(frozen=True)
class HandshakeResult:
    error: ErrorCode
    mechanisms: list[str]


@dataclass(frozen=True)
class AuthenticateResult:
    error: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    close_after_ms: int | None  # close the connection this long after answering


class SaslSession:
    def __init__(self, mechanisms: SaslMechanisms, *, reauth_ms: int = 0,
                 failed_delay_ms: int = 100, peer: str = "") -> None:
        """`reauth_ms`: connections.max.reauth.ms (0: off); `failed_delay_ms`:
        connection.failed.authentication.delay.ms; `peer`: for log lines."""
        self.mechanisms = mechanisms
        self.reauth_ms = reauth_ms
        self.failed_delay_ms = failed_delay_ms
        self.peer = peer
        self._server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.expires_at_ms: int | None = None  # past this, requests need re-authentication
        # after a SaslHandshake v0: the next frames are the mechanism's raw tokens
        self.raw_tokens = False

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def allows(self, api_key: int, now_ms: int) -> bool:
        """May this request be served now? (False: ILLEGAL_SASL_STATE, then close.)"""
        if api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return True
        if api_key == SASL_AUTHENTICATE:
            return self._server is not None
        if self.principal is None:
            return False
        return self.expires_at_ms is None or now_ms < self.expires_at_ms

    def handshake(self, mechanism: str, version: int = 1) -> HandshakeResult:
        if self._server is not None:
            return HandshakeResult(ErrorCode.illegal_sasl_state, self.mechanisms.enabled)
        if self.principal is not None and mechanism != self.mechanism:
            # KIP-368: re-authentication must use the same mechanism
            return HandshakeResult(ErrorCode.illegal_sasl_state, self.mechanisms.enabled)
        try:
            self._server = self.mechanisms.create(mechanism)
        except KafkaError as e:
            log.info("Unsupported SASL mechanism %r from %s", mechanism[:64], self.peer)
            return HandshakeResult(e.code, self.mechanisms.enabled)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        return HandshakeResult(ErrorCode.none, self.mechanisms.enabled)

    def authenticate(self, auth_bytes: bytes, now_ms: int) -> AuthenticateResult:
        server = self._server
        if server is None:
            return AuthenticateResult(ErrorCode.illegal_sasl_state,
                                      "SaslAuthenticate before SaslHandshake", b"", 0, 0)
        previous = self.principal
        try:
            reply = server.evaluate(auth_bytes)
        except (SaslFailure, IllegalSaslState) as e:
            self._server = None
            self.raw_tokens = False
            detail = getattr(e, "detail", str(e))
            log.info("Failed authentication with %s (%s) using %s", self.peer, detail,
                     server.mechanism)
            return AuthenticateResult(e.code, str(e), b"", 0, self.failed_delay_ms)
        if not server.complete:
            return AuthenticateResult(ErrorCode.none, None, reply, 0, None)
        principal = server.principal
        self._server = None
        self.raw_tokens = False
        if previous is not None and principal != previous:
            # KIP-368: the principal may not change on re-authentication
            return AuthenticateResult(
                ErrorCode.sasl_authentication_failed,
                "Cannot change principals during re-authentication from "
                f"{previous}: {principal}", b"", 0, 0)
        self.principal = principal
        lifetime = 0
        if self.reauth_ms > 0:
            lifetime = self.reauth_ms
            if server.credential_expiry_ms is not None:
                lifetime = max(0, min(lifetime, server.credential_expiry_ms - now_ms))
            self.expires_at_ms = now_ms + lifetime
        return AuthenticateResult(ErrorCode.none, None, reply, lifetime, None)
