"""What the Kafka-syntax tools share: client properties as Kafka's tools read them.

`--command-config FILE` (and `--producer.config`, `--consumer.config`) name Java
properties files with the Java client's property names. librdkafka shares most of
those names; the ones it spells differently are translated here, the Java-only ones
with no meaning for a librdkafka client (serializers, deserializers) are dropped, and
anything else goes to librdkafka as it is, which refuses what it does not know with
its own one-line error. An OAUTHBEARER login is translated too: Kafka's unsecured login
(`unsecuredLogin*` JAAS options) becomes librdkafka's unsecured JWT, and the OAuth
client_credentials login (`OAuthBearerLoginCallbackHandler` with `clientId`/
`clientSecret`) its `sasl.oauthbearer.method=oidc`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from odradek.cli.common import error_text

# The Kafka release whose tools these follow (what `--version` prints).
KAFKA_VERSION = "4.0.0"
TIMEOUT_S = 30

_JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "default.api.timeout.ms", "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class", "interceptor.classes", "metric.reporters",
    "partitioner.class", "partition.assignment.strategy.class",
})
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_LOGIN_HANDLER = "sasl.login.callback.handler.class"
_OIDC_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
})
_UNSECURED = "unsecuredLogin"


def load_properties(path: str) -> dict[str, str]:
    """A Java .properties file; a missing one fails as Java's FileInputStream does."""
    from odradek.configdef import read_properties

    try:
        return read_properties(Path(path))
    except OSError as e:
        raise ToolError(f"{path} ({e.strerror})") from None


def librdkafka_config(props: dict[str, str]) -> dict[str, Any]:
    """The Java client's properties as librdkafka's."""
    conf: dict[str, Any] = {}
    for key, value in props.items():
        if key in _JAVA_ONLY:
            continue
        if key == "sasl.jaas.config":
            options = dict(_JAAS_OPTION.findall(value))
            if props.get("sasl.mechanism", "").strip().upper() == "OAUTHBEARER":
                conf.update(_oauthbearer(props.get(_LOGIN_HANDLER, "").strip(), options))
                continue
            if "username" in options:
                conf["sasl.username"] = options["username"]
            if "password" in options:
                conf["sasl.password"] = options["password"]
            continue
        if key == "ssl.truststore.location" and (
                value.endswith((".pem", ".crt")) or props.get("ssl.truststore.type") == "PEM"):
            conf["ssl.ca.location"] = value
            continue
        if key == "ssl.truststore.type" and value.upper() == "PEM":
            continue  # librdkafka reads PEM from ssl.ca.location, which the location became
        conf[key] = value
    return conf


def _oauthbearer(handler: str, options: dict[str, str]) -> dict[str, Any]:
    """librdkafka's settings for the login a Java client's OAUTHBEARER JAAS entry asks."""
    extensions = {k[len("extension_"):]: v for k, v in options.items()
                  if k.startswith("extension_")}
    if handler in _OIDC_HANDLERS:
        if "clientId" not in options or "clientSecret" not in options:
            raise ToolError("sasl.jaas.config: the OAuth login needs clientId and clientSecret")
        conf: dict[str, Any] = {"sasl.oauthbearer.method": "oidc",
                                "sasl.oauthbearer.client.id": options["clientId"],
                                "sasl.oauthbearer.client.secret": options["clientSecret"]}
        if "scope" in options:
            conf["sasl.oauthbearer.scope"] = options["scope"]
        if extensions:
            conf["sasl.oauthbearer.extensions"] = ",".join(
                f"{k}={v}" for k, v in extensions.items())
        return conf
    if handler:
        raise ToolError(f"{_LOGIN_HANDLER}: {handler} is not a login this tool can use "
                        f"(Kafka's unsecured login, or {sorted(_OIDC_HANDLERS)[0]})")
    claim = options.get(_UNSECURED + "PrincipalClaimName", "sub")
    principal = options.get(f"{_UNSECURED}StringClaim_{claim}")
    if not principal:
        raise ToolError(f"sasl.jaas.config: the unsecured OAUTHBEARER login needs "
                        f"{_UNSECURED}StringClaim_{claim}")
    parts = [f"principal={principal}"]
    if claim != "sub":
        parts.append(f"principalClaimName={claim}")
    scope_claim = options.get(_UNSECURED + "ScopeClaimName", "scope")
    scope = options.get(f"{_UNSECURED}ListClaim_{scope_claim}")
    if scope:  # Kafka's list claim: its first character separates the values
        parts.append(f"scope={','.join(v for v in scope[1:].split(scope[0]) if v)}")
        if scope_claim != "scope":
            parts.append(f"scopeClaimName={scope_claim}")
    if _UNSECURED + "LifetimeSeconds" in options:
        parts.append(f"lifeSeconds={options[_UNSECURED + 'LifetimeSeconds']}")
    parts += [f"extension_{k}={v}" for k, v in extensions.items()]
    return {"enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": " ".join(parts)}


def client_conf(bootstrap: str | None, files: list[str] | None = None,
                properties: list[str] | None = None) -> dict[str, Any]:
    """Properties files, then key=value properties, then --bootstrap-server (which wins)."""
    props: dict[str, str] = {}
    for f in files or []:
        props.update(load_properties(f))
    for item in properties or []:
        key, _, value = item.partition("=")
        props[key] = value
    conf = librdkafka_config(props)
    if bootstrap is not None:
        conf["bootstrap.servers"] = bootstrap
    conf.setdefault("log_level", 3)
    return conf


def admin(conf: dict[str, Any]) -> Any:
    """An AdminClient that has reached the cluster: a refused login fails at once, as the
    Java client's SaslAuthenticationException does, not after the request timeout."""
    import time

    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    refused: list[str] = []

    def on_error(err: Any) -> None:
        if err.code() == KafkaError._AUTHENTICATION or err.fatal():
            refused.append(str(err.str()))

    try:
        settings: dict[str, Any] = {**conf, "error_cb": on_error}
        client = AdminClient(settings)
    except Exception as e:  # KafkaException for a bad property
        raise ToolError(error_text(e)) from None
    probe = client.describe_cluster(request_timeout=TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while not probe.done() and not refused and time.monotonic() < deadline:
        client.poll(0.05)
    if refused:
        raise ToolError(refused[0])
    return client


class ToolError(Exception):
    """A failure the tool reports in its own words (and exits 1)."""


def message_of(e: BaseException) -> str:
    return error_text(e)
