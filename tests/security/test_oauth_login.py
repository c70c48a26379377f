"""A broker's own OAUTHBEARER login, in process: the token Kafka's unsecured login
makes (and the principal the other broker's validator derives from it), the OAuth
client_credentials login against a local token endpoint, the refresh schedule, and the
settings refused at start-up."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.configdef import ConfigError
from odradek.security.sasl import SaslMechanisms
from odradek.security.sasl.base import SaslFailure
from odradek.security.sasl.client import login
from odradek.security.sasl.login_refresh import (
    NoTokenYet,
    RefreshConfig,
    RefreshingLogin,
    next_refresh_ms,
)
from odradek.security.sasl.oauth_login import (
    ClientCredentialsLogin,
    LoginFailed,
    LoginToken,
    OAuthBearerClient,
    UnsecuredLogin,
    login_token,
)
from odradek.security.sasl.oauthbearer import OAuthBearerServer
from tests.security.oauth_idp import IdentityProvider

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
LISTENER = "SASL_PLAINTEXT"
JAAS_PROP = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
OIDC = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def claims_of(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    header, payload, signature = token.split(".")
    def decode(part: str) -> dict[str, Any]:
        return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))
    return decode(header), decode(payload), signature


def broker_props(jaas_options: str, **extra: str) -> dict[str, str]:
    return {"sasl.enabled.mechanisms": "OAUTHBEARER",
            JAAS_PROP: f"{MODULE} {jaas_options};", **extra}


def test_unsecured_login_makes_kafkas_token_and_the_other_broker_derives_admin() -> None:
    props = broker_props(
        'unsecuredLoginStringClaim_sub="admin" unsecuredLoginListClaim_scope="|kafka-broker|ops" '
        'unsecuredLoginNumberClaim_tier="2" unsecuredLoginLifetimeSeconds="600" '
        'unsecuredLoginExtension_traceId="t-7" unsecuredValidatorRequiredScope="kafka-broker"')
    before = time.time()
    client = login(props, LISTENER, "OAUTHBEARER")()
    assert isinstance(client, OAuthBearerClient)
    first = client.first()
    assert first.startswith(b"n,,\x01auth=Bearer ") and first.endswith(b"\x01traceId=t-7\x01\x01")
    token = first.split(b"Bearer ")[1].split(b"\x01")[0].decode()
    header, claims, signature = claims_of(token)
    assert header == {"alg": "none"} and signature == ""
    assert claims["sub"] == "admin" and claims["scope"] == ["kafka-broker", "ops"]
    assert claims["tier"] == 2.0 and isinstance(claims["tier"], float)
    assert before - 1 <= claims["iat"] <= time.time() + 1  # seconds, with a fraction
    assert claims["exp"] - claims["iat"] == pytest.approx(600)

    # the other broker, with the same JAAS entry, validates it as Kafka's validator does
    server = SaslMechanisms.from_config(props, LISTENER).create("OAUTHBEARER")
    assert isinstance(server, OAuthBearerServer)
    assert server.evaluate(first) == b"" and client.evaluate(b"") == b""
    assert client.complete and str(server.principal) == "User:admin"
    assert server.extensions == {"traceId": "t-7"}
    assert server.credential_expiry_ms == int(claims["exp"] * 1000)


def test_the_principal_claim_and_scope_claim_can_be_renamed_on_both_sides() -> None:
    props = broker_props(
        'unsecuredLoginPrincipalClaimName="client_id" unsecuredLoginStringClaim_client_id="b1" '
        'unsecuredLoginScopeClaimName="scp" unsecuredLoginStringClaim_scp="kafka-broker" '
        'unsecuredValidatorPrincipalClaimName="client_id" unsecuredValidatorScopeClaimName="scp" '
        'unsecuredValidatorRequiredScope="kafka-broker"')
    client = login(props, LISTENER, "OAUTHBEARER")()
    server = SaslMechanisms.from_config(props, LISTENER).create("OAUTHBEARER")
    server.evaluate(client.first())
    assert str(server.principal) == "User:b1"


def test_a_token_without_the_required_scope_is_refused_as_rfc_7628_says() -> None:
    props = broker_props('unsecuredLoginStringClaim_sub="admin" '
                         'unsecuredValidatorRequiredScope="kafka-broker"')
    client = login(props, LISTENER, "OAUTHBEARER")()
    server = SaslMechanisms.from_config(props, LISTENER).create("OAUTHBEARER")
    error = server.evaluate(client.first())
    assert json.loads(error)["status"] == "insufficient_scope"
    assert client.evaluate(error) == b"\x01" and not client.complete
    with pytest.raises(SaslFailure, match="insufficient_scope") as refused:
        server.evaluate(b"\x01")
    assert "was missing a required scope (kafka-broker)" in refused.value.detail
    with pytest.raises(SaslFailure, match="after its error"):
        client.evaluate(b"more")


@pytest.mark.parametrize("value,expected", [
    (",a,b", ["a", "b"]), ("|x|y", ["x", "y"]), (",", []), ("", []),
    # Java's split drops trailing empties; Kafka then adds one empty element
    (",a,b,", ["a", "b", ""]), (",a,,b", ["a", "", "b", ""]), (",,a", ["", "a", ""]),
])
def test_list_claims_are_split_on_their_first_character_as_kafka_does(
        value: str, expected: list[str]) -> None:
    made = UnsecuredLogin({"unsecuredLoginStringClaim_sub": "s",
                           "unsecuredLoginListClaim_groups": value}, "p").fetch()
    assert claims_of(made.value)[1]["groups"] == expected


@pytest.mark.parametrize("extra,message", [
    ({JAAS_PROP: f"{MODULE};"}, "no unsecuredLogin options"),
    ({JAAS_PROP: f'{MODULE} unsecuredLoginExtension_a="b";'},
     "Extensions provided in login context without a token"),
    ({JAAS_PROP: f'{MODULE} unsecuredLoginStringClaim_sub="a" unsecuredLoginNumberClaim_exp="1";'},
     "Cannot explicitly set the 'exp' claim"),
    ({JAAS_PROP: f'{MODULE} unsecuredLoginStringClaim_sub="a" unsecuredLoginLifetimeSeconds="x";'},
     "unsecuredLoginLifetimeSeconds"),
    ({JAAS_PROP: f'{MODULE} unsecuredLoginStringClaim_name="a";'}, "the token has no principal"),
    ({JAAS_PROP: f'{MODULE} unsecuredLoginStringClaim_sub="a" unsecuredLoginExtension_auth="x";'},
     "Extension name auth is invalid"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class": "com.Mine"},
     "unsupported login callback handler com.Mine"),
    ({"sasl.oauthbearer.token.endpoint.url": "http://idp/token"},
     "token.endpoint.url is set, but the login is the unsecured one"),
    ({"sasl.login.refresh.window.factor": "0.3"}, "window.factor: Value must be at least 0.5"),
    ({"sasl.login.refresh.buffer.seconds": "4000"},
     "buffer.seconds: Value must be no more than 3600"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class": OIDC,
      "sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"}, "an http, https or file URL"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class": OIDC,
      "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
      JAAS_PROP: f'{MODULE} clientId="broker";'}, "the clientSecret option is required"),
    ({"sasl.login.unknown.setting": "1"}, "sasl.login.unknown.setting is not supported"),
])
def test_a_broker_refuses_an_oauthbearer_login_it_cannot_make_in_one_line(
        tmp_path: Path, extra: dict[str, str], message: str) -> None:
    from odradek.server.config import BrokerConfig

    overrides = {"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path),
                 "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                 "security.inter.broker.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
                 **broker_props('unsecuredLoginStringClaim_sub="admin"'), **extra}
    with pytest.raises(ConfigError, match=message) as refused:
        BrokerConfig.load(environ={}, overrides=overrides)
    assert "\n" not in str(refused.value)


def test_a_login_handler_is_refused_for_the_other_mechanisms(tmp_path: Path) -> None:
    from odradek.server.config import BrokerConfig

    with pytest.raises(ConfigError, match="supported for OAUTHBEARER only, not PLAIN"):
        BrokerConfig.load(environ={}, overrides={
            "zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path),
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required '
                'username="a" password="b" user_a="b";',
            "listener.name.sasl_plaintext.plain.sasl.login.callback.handler.class": OIDC})


def _token(start_s: float, lifetime_s: float) -> LoginToken:
    return LoginToken("x", "p", int((start_s + lifetime_s) * 1000), int(start_s * 1000))


def test_the_refresh_time_follows_kafkas_window_buffer_and_minimum_period() -> None:
    plain = RefreshConfig(window_factor=0.8, window_jitter=0.0)
    hour = _token(1000, 3600)
    # 80% of the lifetime
    assert next_refresh_ms(1_000_000, hour, plain) == (1000 + 2880) * 1000
    # a factor that would end inside the buffer: the buffer's start instead
    late = RefreshConfig(window_factor=0.95, window_jitter=0.0, buffer_s=300)
    assert next_refresh_ms(1_000_000, hour, late) == (1000 + 3600 - 300) * 1000
    # too short for both buffers: 80% of what is left
    short = _token(1000, 100)
    assert next_refresh_ms(1_000_000, short, plain) == 1_000_000 + 80_000
    # never sooner than the minimum period from now
    old = _token(0, 4000)
    assert next_refresh_ms(3_250_000, old, plain) == 3_250_000 + 60_000
    # jitter moves it later, within the window
    jittered = RefreshConfig(window_factor=0.5, window_jitter=0.25)
    assert next_refresh_ms(1_000_000, hour, jittered, rng=lambda: 1.0) == \
        (1000 + 2700) * 1000
    # an expired token is tried again 10 s later
    assert next_refresh_ms(10_000_000, short, plain) == 10_010_000


def test_a_short_lived_token_is_refreshed_on_the_logins_own_thread() -> None:
    source = UnsecuredLogin({"unsecuredLoginStringClaim_sub": "admin",
                             "unsecuredLoginLifetimeSeconds": "1"}, "p")
    refreshing = RefreshingLogin(source.fetch, {}, RefreshConfig(min_period_s=0, buffer_s=0),
                                 "test")
    with pytest.raises(NoTokenYet):
        refreshing.client()
    refreshing.start()
    try:
        deadline = time.monotonic() + 15
        while refreshing.refreshes < 1:
            assert time.monotonic() < deadline, "no first token"
            time.sleep(0.02)
        first = refreshing.client().first()
        while refreshing.refreshes < 3:  # each before its predecessor expired
            assert time.monotonic() < deadline, "the token was not refreshed"
            time.sleep(0.05)
        assert refreshing.client().first() != first
    finally:
        refreshing.close()


@pytest.fixture
def idp(tmp_path: Path) -> Iterator[IdentityProvider]:
    with IdentityProvider(tmp_path, {"broker": "broker-s3cret", "rogue": "rogue-s3cret"},
                          rogue=frozenset({"rogue"})).serving() as provider:
        yield provider


def test_the_oauth_login_uses_client_credentials_and_its_token_verifies_against_the_jwks(
        idp: IdentityProvider) -> None:
    props = {"sasl.enabled.mechanisms": "OAUTHBEARER",
             **idp.broker_properties(LISTENER, "broker", "broker-s3cret", scope="kafka ops")}
    factory = login(props, LISTENER, "OAUTHBEARER")
    deadline = time.monotonic() + 15
    while True:  # the first token comes on the login's thread
        try:
            client = factory()
            break
        except NoTokenYet:
            assert time.monotonic() < deadline, "no token from the endpoint"
            time.sleep(0.02)
    request = idp.requests[-1]
    assert request["client_id"] == "broker" and request["path"] == "/oauth2/token"
    assert request["form"] == {"grant_type": ["client_credentials"], "scope": ["kafka ops"]}
    assert request["content_type"] == "application/x-www-form-urlencoded"
    server = SaslMechanisms.from_config(props, LISTENER).create("OAUTHBEARER")
    assert server.evaluate(client.first()) == b""
    assert str(server.principal) == "User:broker"
    factory.__self__.close()  # type: ignore[attr-defined]

    # a token the endpoint signed with a key outside the JWKS is not taken
    token = ClientCredentialsLogin.from_config(
        {**props, "sasl.oauthbearer.token.endpoint.url": idp.token_url},
        {"clientId": "rogue", "clientSecret": "rogue-s3cret"}, "p").fetch()
    refused = SaslMechanisms.from_config(props, LISTENER).create("OAUTHBEARER")
    reply = refused.evaluate(OAuthBearerClient(token.value, {}).first())
    assert json.loads(reply) == {"status": "invalid_token"}


def test_a_refused_client_secret_stops_the_start_up_in_one_line_without_the_secret(
        idp: IdentityProvider, tmp_path: Path) -> None:
    from odradek.server.config import BrokerConfig

    overrides = {"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path),
                 "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "OAUTHBEARER",
                 "security.inter.broker.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
                 **idp.broker_properties(LISTENER, "broker", "not-the-s3cret")}
    with pytest.raises(ConfigError, match="OAuth login failed: The response code 401") as e:
        BrokerConfig.load(environ={}, overrides=overrides)
    assert "invalid_client" in str(e.value) and "not-the-s3cret" not in str(e.value)
    assert "\n" not in str(e.value) and len(idp.requests) == 1  # 401 is not retried


def test_the_token_endpoint_is_retried_with_backoff_then_given_up(
        idp: IdentityProvider) -> None:
    options = {"clientId": "broker", "clientSecret": "broker-s3cret"}
    props = {"sasl.oauthbearer.token.endpoint.url": idp.token_url,
             "sasl.login.retry.backoff.ms": "10", "sasl.login.retry.backoff.max.ms": "5000"}
    idp.fail = [503, 500]
    token = ClientCredentialsLogin.from_config(props, options, "p").fetch()
    assert token.principal_name == "broker" and len(idp.requests) == 3
    idp.fail = [503] * 1000
    quick = {**props, "sasl.login.retry.backoff.max.ms": "200"}
    with pytest.raises(LoginFailed, match="unexpected response code 503"):
        ClientCredentialsLogin.from_config(quick, options, "p").fetch()


def test_a_token_file_is_read_at_each_login(tmp_path: Path, idp: IdentityProvider) -> None:
    path = tmp_path / "token.jwt"
    path.write_text(idp.issue("from-file", None) + "\n")
    source = ClientCredentialsLogin.from_config(
        {"sasl.oauthbearer.token.endpoint.url": f"file://{path}"}, {}, "p")
    assert source.fetch().principal_name == "from-file"
    path.write_text("not.a-jwt")
    with pytest.raises(LoginFailed, match="expected three sections"):
        source.fetch()


@pytest.mark.parametrize("claims,message", [
    ({"exp": 10}, "sub value must be a non-blank string"),
    ({"sub": "a"}, "exp value must be a non-null number"),
    ({"sub": "a", "exp": 10, "scope": ["x", "x"]}, "must not contain duplicates"),
    ({"sub": "a", "exp": 10, "iat": -1}, "iat value must be null or non-negative"),
])
def test_a_token_from_the_endpoint_is_read_as_kafkas_login_validator_reads_it(
        claims: dict[str, Any], message: str) -> None:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(LoginFailed, match=message):
        login_token(f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln")
    ok = login_token(f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln".replace(
        payload, base64.urlsafe_b64encode(b'{"sub":"a","exp":10.9,"iat":5}').decode()))
    assert (ok.principal_name, ok.lifetime_ms, ok.start_time_ms) == ("a", 10_000, 5_000)


def test_the_refresher_thread_ends_with_its_login() -> None:
    import gc

    source = UnsecuredLogin({"unsecuredLoginStringClaim_sub": "admin"}, "p")
    refreshing = RefreshingLogin(source.fetch, {}, RefreshConfig(), "gone")
    refreshing.start()
    thread = refreshing._thread
    assert thread is not None
    deadline = time.monotonic() + 10
    while refreshing.refreshes < 1:  # the first token, then it sleeps for ~48 minutes
        assert time.monotonic() < deadline
        time.sleep(0.02)
    del refreshing
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()


def test_the_oauth_login_sends_its_extensions_and_can_urlencode_its_credentials(
        idp: IdentityProvider) -> None:
    idp.clients["svc a"] = "p&w:x"
    props = {"sasl.oauthbearer.token.endpoint.url": idp.token_url,
             "sasl.oauthbearer.header.urlencode": "true"}
    options = {"clientId": "svc a", "clientSecret": "p&w:x", "extension_traceId": "t-1"}
    source = ClientCredentialsLogin.from_config(props, options, "p")
    with pytest.raises(LoginFailed, match="401"):  # the IdP takes them as sent, unencoded
        source.fetch()
    assert idp.requests[-1]["client_id"] == "svc+a"  # RFC 6749 2.3.1
    plain = ClientCredentialsLogin.from_config(
        {**props, "sasl.oauthbearer.header.urlencode": "false"}, options, "p")
    token = plain.fetch()
    client = OAuthBearerClient(token.value, plain.extensions)
    assert client.first().endswith(b"\x01traceId=t-1\x01\x01")
    with pytest.raises(ConfigError, match="Extension name bad_name is invalid"):
        ClientCredentialsLogin.from_config(props, {**options, "extension_bad_name": "x"}, "p")
