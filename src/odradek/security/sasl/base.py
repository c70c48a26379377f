"""What every server-side SASL mechanism is: bytes in, bytes out, done or failed.

A mechanism never touches a socket: the connection feeds it each SaslAuthenticate
`auth_bytes` and sends back what `evaluate` returns. A failure carries two texts: the
one for the wire (SaslAuthenticate's error_message), which never holds a secret, and a
detail for the broker's log, which never holds one either (no password, proof or token).
"""

from __future__ import annotations

import abc
import secrets

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.principal import USER_TYPE, KafkaPrincipal


class SaslFailure(KafkaError):
    """SASL_AUTHENTICATION_FAILED; `str()` is the client's message, `detail` the log's."""

    code = ErrorCode.sasl_authentication_failed

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class IllegalSaslState(KafkaError):
    code = ErrorCode.illegal_sasl_state


class UnsupportedSaslMechanism(KafkaError):
    code = ErrorCode.unsupported_sasl_mechanism


def generic_failure(mechanism: str, detail: str) -> SaslFailure:
    """Kafka answers a plain SaslException with this fixed text, whatever the cause."""
    return SaslFailure(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}", detail)


def secure_random_string() -> str:
    """ScramFormatter.secureRandomString: 130 random bits in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(reversed(out)) or "0"


class SaslServer(abc.ABC):
    mechanism: str

    def __init__(self) -> None:
        self.complete = False
        self.failed = False
        self.authorization_id: str | None = None
        # When the credential stops being valid (ms since the epoch): an OAUTHBEARER
        # token's exp, for KIP-368 re-authentication; None when it does not expire.
        self.credential_expiry_ms: int | None = None

    @abc.abstractmethod
    def _evaluate(self, response: bytes) -> bytes: ...

    def evaluate(self, response: bytes) -> bytes:
        """One SaslAuthenticate round: the client's bytes in, the server's bytes out.

        Raises SaslFailure (or IllegalSaslState) and stays failed; once `complete`,
        `principal` names who authenticated."""
        if self.failed or self.complete:
            raise IllegalSaslState(
                f"Unexpected SASL/{self.mechanism} exchange after it "
                f"{'failed' if self.failed else 'completed'}")
        try:
            return self._evaluate(bytes(response))
        except KafkaError:
            self.failed = True
            raise

    @property
    def principal(self) -> KafkaPrincipal:
        if not self.complete or self.authorization_id is None:
            raise IllegalSaslState("Authentication exchange has not completed")
        return KafkaPrincipal(USER_TYPE, self.authorization_id)
