"""How this broker talks to the others: Kafka's inter-broker listener.

`inter.broker.listener.name` or `security.inter.broker.protocol` (not both; default
PLAINTEXT) names a listener that every broker advertises; replica fetchers and
WriteTxnMarkers connect to the other brokers' endpoint of that listener, speaking its
protocol: TLS with the listener's own truststore (and keystore, as the client
certificate), SASL with `sasl.mechanism.inter.broker.protocol` and the listener's
JAAS entry — the broker's own login, as Kafka's broker uses it: a username and password
(PLAIN, SCRAM), or for OAUTHBEARER a token from its login callback handler (Kafka's
unsecured one, or the OAuth client_credentials grant against
`sasl.oauthbearer.token.endpoint.url`), refreshed before it expires. The broker's
principal then needs CLUSTER_ACTION (usually: super.users).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odradek.configdef import ConfigError
from odradek.replication.channel import ChannelSecurity
from odradek.security.props import listener_view, parse_list
from odradek.security.sasl.client import login
from odradek.security.tls import client_context

LISTENER_NAME = "inter.broker.listener.name"
PROTOCOL = "security.inter.broker.protocol"
MECHANISM = "sasl.mechanism.inter.broker.protocol"
PROPERTIES = frozenset({LISTENER_NAME, PROTOCOL, MECHANISM})
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def listener_name(props: Mapping[str, str]) -> str:
    """Kafka's KafkaConfig.interBrokerListenerName: the name given, or the listener
    named after the protocol given (PLAINTEXT by default)."""
    name = props.get(LISTENER_NAME, "").strip()
    protocol = props.get(PROTOCOL, "").strip()
    if name and protocol:
        raise ConfigError(f"Only one of {LISTENER_NAME} and {PROTOCOL} should be set.")
    if protocol and protocol.upper() not in _PROTOCOLS:
        raise ConfigError(f"{PROTOCOL}: {protocol} is not one of {', '.join(_PROTOCOLS)}")
    return (name or protocol or "PLAINTEXT").upper()


def check(props: Mapping[str, str], advertised: Sequence[str],
          protocols: Mapping[str, str]) -> str:
    """The inter-broker listener, checked as Kafka checks it at start-up; a broker
    that cannot reach the others stops here, in one line."""
    name = listener_name(props)
    if name not in advertised:
        raise ConfigError(
            f"{LISTENER_NAME} must be a listener name defined in advertised.listeners. "
            f"The valid options based on currently configured listeners are "
            f"{','.join(advertised)} (it is {name}: set {LISTENER_NAME} or {PROTOCOL})")
    security(props, name, protocols[name], start=False)  # keystores readable, login works
    return name


def security(props: Mapping[str, str], name: str, protocol: str,
             start: bool = True) -> ChannelSecurity:
    """`start=False`: check only (an OAUTHBEARER login keeps no token and no thread)."""
    view = listener_view(props, name)
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = client_context({**view, "security.protocol": protocol})
    sasl = None
    if protocol.startswith("SASL_"):
        mechanism = props.get(MECHANISM, "").strip().upper()
        enabled = [m.upper() for m in parse_list(view.get("sasl.enabled.mechanisms"))]
        if not mechanism:
            raise ConfigError(f"{MECHANISM} must be set when {name} ({protocol}) is the "
                              "inter-broker listener (Kafka's default, GSSAPI, is not "
                              "supported)")
        if mechanism not in enabled:
            raise ConfigError(f"{MECHANISM} must be included in sasl.enabled.mechanisms "
                              f"when SASL is used for inter-broker communication ({mechanism} "
                              f"is not in {','.join(enabled) or 'an empty list'})")
        sasl = login(props, name, mechanism, start)
    return ChannelSecurity(ssl_context, sasl, name)
