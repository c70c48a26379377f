"""What each listener's security protocol asks of its connections: TLS on the socket,
SASL before any other request, and who the client is once it has proved it.

Built once per listener from the broker's properties (Kafka's names, with
`listener.name.<listener>.` overrides) by the security layer (odradek.security); the
connection holds one `ConnectionSecurity` and the request pipeline reads its principal.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.security.props import listener_view
from odradek.security.sasl import SaslMechanisms
from odradek.security.sasl.scram import ScramCredential
from odradek.security.sasl.session import SaslSession
from odradek.security.tls import ServerTls

log = logging.getLogger(__name__)

ScramLookup = Callable[[str, str], ScramCredential | None]


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    tls: ServerTls | None
    sasl: SaslMechanisms | None
    reauth_ms: int
    failed_delay_ms: int

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self.tls.context if self.tls is not None else None

    def for_connection(self, peer: str) -> ConnectionSecurity:
        session = None
        if self.sasl is not None:
            session = SaslSession(self.sasl, reauth_ms=self.reauth_ms,
                                  failed_delay_ms=self.failed_delay_ms, peer=peer)
        return ConnectionSecurity(self, session)


class ConnectionSecurity:
    """One connection's identity: TLS's client certificate, or SASL's login."""

    def __init__(self, listener: ListenerSecurity, sasl: SaslSession | None) -> None:
        self.listener = listener
        self.sasl = sasl
        self.tls_principal: KafkaPrincipal = ANONYMOUS
        self.close_after_ms: int | None = None  # a failed login: close after answering

    def on_tls_established(self, ssl_object: ssl.SSLObject | None) -> None:
        tls = self.listener.tls
        if tls is not None and ssl_object is not None:
            self.tls_principal = tls.principal(ssl_object)

    @property
    def principal(self) -> KafkaPrincipal:
        if self.sasl is not None:
            return self.sasl.principal or ANONYMOUS
        return self.tls_principal


def _int(view: Mapping[str, str], name: str, default: int) -> int:
    from odradek.configdef import ConfigError

    text = view.get(name)
    try:
        return default if text is None else int(text)
    except ValueError:
        raise ConfigError(f"Invalid value {text} for configuration {name}: "
                          "not a number") from None


def listener_security(props: Mapping[str, str], name: str, protocol: str,
                      scram: ScramLookup) -> ListenerSecurity:
    """Raises ConfigError (one line naming the property) for what cannot be served."""
    tls = ServerTls.from_config(props, name) if protocol in ("SSL", "SASL_SSL") else None
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = SaslMechanisms.from_config(props, name, scram_credentials=scram)
    view = listener_view(props, name)
    return ListenerSecurity(name, protocol, tls, sasl,
                            reauth_ms=_int(view, "connections.max.reauth.ms", 0),
                            failed_delay_ms=_int(
                                view, "connection.failed.authentication.delay.ms", 100))


def no_scram(_mechanism: str, _user: str) -> ScramCredential | None:
    return None
