"""The security layer, sans-IO: principals, TLS contexts, SASL mechanisms, the ACL
authorizer, the API → permission table and client quotas. The server wires it in;
nothing here opens a socket."""

from __future__ import annotations

from odradek.security.tls import SERVER_PROPERTIES as TLS_PROPERTIES

# Broker properties this layer honours, beyond TLS_PROPERTIES; each may also appear as
# `listener.name.<listener>.<property>` (SASL ones also with `.<mechanism>.` inside).
# JAAS is read only in Kafka's broker form,
# `listener.name.<listener>.<mechanism>.sasl.jaas.config`.
SASL_PROPERTIES = frozenset({
    "sasl.enabled.mechanisms", "sasl.server.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
    # the broker's own OAUTHBEARER login to other brokers (sasl/oauth_login.py)
    "sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.header.urlencode", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
})
AUTHORIZER_PROPERTIES = frozenset({
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
})
QUOTA_PROPERTIES = frozenset({
    "quota.window.num", "quota.window.size.seconds", "max.connection.creation.rate",
})
HONOURED_PROPERTIES = TLS_PROPERTIES | SASL_PROPERTIES | AUTHORIZER_PROPERTIES | QUOTA_PROPERTIES

__all__ = ["AUTHORIZER_PROPERTIES", "HONOURED_PROPERTIES", "QUOTA_PROPERTIES",
           "SASL_PROPERTIES", "TLS_PROPERTIES"]
