"""--command-config with a Java client's OAUTHBEARER login: Kafka's unsecured login and the
OAuth client_credentials login (KIP-768) work in the Kafka-syntax tools unchanged, against
a broker with one listener of each kind (tokens verified against an identity provider's
JWKS on one, Kafka's unsecured validator on the other)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.cli.kafka.client import ToolError, librdkafka_config
from tests.conftest import BrokerProcess, free_port
from tests.security.oauth_idp import AUDIENCE, ISSUER, IdentityProvider

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
OIDC_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@dataclass
class Site:
    idp: IdentityProvider
    oidc: str  # address of the listener that verifies tokens against the JWKS
    dev: str  # address of the listener with Kafka's unsecured validator


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("oauth-tools")
    with IdentityProvider(base, {"alice": "alice-s3cret"}).serving() as idp:
        oidc, dev = free_port(), free_port()
        broker = BrokerProcess(base / "data", overrides={
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,OIDC:SASL_PLAINTEXT,DEV:SASL_PLAINTEXT",
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.oidc.oauthbearer.sasl.jaas.config": MODULE + ";",
            "listener.name.dev.oauthbearer.sasl.jaas.config": MODULE + ";",
            "sasl.oauthbearer.jwks.endpoint.url": f"file://{idp.jwks_path}",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        })
        broker.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                                         f"OIDC://127.0.0.1:{oidc},DEV://127.0.0.1:{dev}")
        broker.start()
        try:
            yield Site(idp, f"127.0.0.1:{oidc}", f"127.0.0.1:{dev}")
        finally:
            broker.stop()


def _run(kafka_home: Path, address: str, config: Path,
         *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kafka_home / "bin" / "kafka-topics.sh"), "--bootstrap-server",
                           address, "--command-config", str(config), *args],
                          capture_output=True, text=True, timeout=120)


def _oidc_properties(path: Path, site: Site, secret: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=OAUTHBEARER\n"
        f"sasl.login.callback.handler.class={OIDC_LOGIN}\n"
        f"sasl.oauthbearer.token.endpoint.url={site.idp.token_url}\n"
        f'sasl.jaas.config={MODULE} clientId="alice" clientSecret="{secret}";\n')
    return path


def test_the_oauth_client_credentials_login_of_a_java_client_works_in_the_tools(
        kafka_home: Path, site: Site, tmp_path: Path) -> None:
    config = _oidc_properties(tmp_path / "oidc.properties", site, "alice-s3cret")
    created = _run(kafka_home, site.oidc, config, "--create", "--topic", "oidc-topic")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "oidc-topic" in _run(kafka_home, site.oidc, config, "--list").stdout.split()
    # the tool fetched its token from the identity provider, as alice
    assert any(r["client_id"] == "alice" for r in site.idp.requests)


def test_a_wrong_client_secret_fails_the_tool_in_one_line(
        kafka_home: Path, site: Site, tmp_path: Path) -> None:
    config = _oidc_properties(tmp_path / "oidc.properties", site, "wrong")
    out = _run(kafka_home, site.oidc, config, "--list")
    assert out.returncode == 1
    assert out.stdout.startswith("Error while executing topic command : ")
    assert len(out.stdout.splitlines()) == 1
    assert "wrong" not in out.stdout + out.stderr  # the secret is never printed


def test_kafkas_unsecured_login_of_a_java_client_works_in_the_tools(
        kafka_home: Path, site: Site, tmp_path: Path) -> None:
    config = tmp_path / "dev.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=OAUTHBEARER\n"
        f'sasl.jaas.config={MODULE} unsecuredLoginStringClaim_sub="alice";\n')
    created = _run(kafka_home, site.dev, config, "--create", "--topic", "dev-topic")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "dev-topic" in _run(kafka_home, site.dev, config, "--list").stdout.split()


def test_the_unsecured_logins_options_become_librdkafkas() -> None:
    conf = librdkafka_config({
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_user="bob" '
                            'unsecuredLoginPrincipalClaimName="user" '
                            'unsecuredLoginListClaim_scope="|read|write" '
                            'unsecuredLoginLifetimeSeconds="600" extension_traceId="t1";'})
    assert conf["enable.sasl.oauthbearer.unsecure.jwt"] is True
    assert conf["sasl.oauthbearer.config"] == (
        "principal=bob principalClaimName=user scope=read,write lifeSeconds=600 "
        "extension_traceId=t1")


def test_an_oauthbearer_login_the_tools_cannot_make_is_refused() -> None:
    with pytest.raises(ToolError, match="unsecuredLoginStringClaim_sub"):
        librdkafka_config({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": MODULE + ";"})
    with pytest.raises(ToolError, match="clientId and clientSecret"):
        librdkafka_config({"sasl.mechanism": "OAUTHBEARER",
                           "sasl.login.callback.handler.class": OIDC_LOGIN,
                           "sasl.jaas.config": f'{MODULE} clientId="alice";'})
    with pytest.raises(ToolError, match="not a login this tool can use"):
        librdkafka_config({"sasl.mechanism": "OAUTHBEARER",
                           "sasl.login.callback.handler.class": "com.example.MyHandler",
                           "sasl.jaas.config": MODULE + ";"})
