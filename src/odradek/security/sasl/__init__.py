"""Server-side SASL: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER as small state machines.

`SaslMechanisms.from_config(props, listener, scram_credentials)` reads a listener's
`sasl.enabled.mechanisms` and JAAS entries once; `create(mechanism)` gives a fresh
`SaslServer` per SaslHandshake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from odradek.configdef import ConfigError
from odradek.security.props import listener_view, parse_list
from odradek.security.sasl import jaas, oauthbearer, plain, scram
from odradek.security.sasl.base import (
    IllegalSaslState,
    SaslFailure,
    SaslServer,
    UnsupportedSaslMechanism,
)

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
JWKS_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")

__all__ = ["IllegalSaslState", "SaslFailure", "SaslMechanisms", "SaslServer",
           "UnsupportedSaslMechanism"]


@dataclass
class SaslMechanisms:
    enabled: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    scram_credentials: Callable[[str, str], scram.ScramCredential | None] = (
        lambda mechanism, user: None)
    oauth_validator: oauthbearer.TokenValidator | None = None

    @staticmethod
    def from_config(props: Mapping[str, str], listener: str,
                    scram_credentials: Callable[[str, str], scram.ScramCredential | None]
                    = lambda mechanism, user: None) -> SaslMechanisms:
        """`scram_credentials(mechanism, user)` looks a user's stored credential up
        (the metadata store, ZooKeeper's /config/users)."""
        view = listener_view(props, listener)
        raw = view.get("sasl.enabled.mechanisms")
        enabled = parse_list(raw)
        prop = "sasl.enabled.mechanisms"
        if not enabled:
            raise ConfigError(f"{prop}: no mechanism enabled for SASL listener {listener} "
                              "(Kafka's default GSSAPI is not supported; use "
                              f"{', '.join(SUPPORTED)})")
        for m in enabled:
            if m not in SUPPORTED:
                raise ConfigError(f"{prop}: unsupported mechanism {m} (supported: "
                                  f"{', '.join(SUPPORTED)})")
        if "sasl.jaas.config" in view:
            raise ConfigError("sasl.jaas.config: a broker reads JAAS per listener and "
                              "mechanism, listener.name.<listener>.<mechanism>.sasl.jaas.config")
        out = SaslMechanisms(enabled, scram_credentials=scram_credentials)
        if "PLAIN" in enabled:
            module = jaas.listener_jaas(props, listener, "PLAIN")
            if module is None:
                raise ConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config: "
                                  f"required for PLAIN on listener {listener}")
            if "sasl.server.callback.handler.class" in listener_view(props, listener, "PLAIN"):
                raise ConfigError("sasl.server.callback.handler.class: custom PLAIN callback "
                                  "handlers are not supported")
            out.plain_users = module.plain_users
        if "OAUTHBEARER" in enabled:
            mview = listener_view(props, listener, "OAUTHBEARER")
            handler = mview.get("sasl.server.callback.handler.class", UNSECURED_HANDLER)
            if handler in JWKS_HANDLERS:
                out.oauth_validator = oauthbearer.JwksValidator.from_config(mview)
            elif handler == UNSECURED_HANDLER:
                module = jaas.listener_jaas(props, listener, "OAUTHBEARER")
                out.oauth_validator = oauthbearer.UnsecuredJwsValidator.from_jaas_options(
                    module.options if module else {})
            else:
                raise ConfigError(f"sasl.server.callback.handler.class: unsupported handler "
                                  f"{handler} for OAUTHBEARER")
        return out

    def create(self, mechanism: str) -> SaslServer:
        """A server for one exchange; UNSUPPORTED_SASL_MECHANISM for anything else."""
        if mechanism not in self.enabled:
            raise UnsupportedSaslMechanism(f"Unsupported SASL mechanism {mechanism}")
        if mechanism == "PLAIN":
            return plain.PlainServer(self.plain_users)
        if mechanism in scram.MECHANISMS:
            lookup = self.scram_credentials
            return scram.ScramServer(mechanism, lambda user: lookup(mechanism, user))
        assert self.oauth_validator is not None
        return oauthbearer.OAuthBearerServer(self.oauth_validator)
