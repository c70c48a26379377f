"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer, checked against JAAS `user_<name>`."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.security.sasl.base import SaslFailure, SaslServer

MECHANISM = "PLAIN"


class PlainServer(SaslServer):
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        """`users`: name → password, from the PlainLoginModule's `user_<name>` options."""
        super().__init__()
        self._users = users

    def _evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise SaslFailure(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare even for an unknown user so timing does not tell which names exist
        ok = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslFailure("Authentication failed: Invalid username or password",
                              f"SASL/PLAIN: invalid username or password for user {username!r}")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
