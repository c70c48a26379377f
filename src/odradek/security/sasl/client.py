"""The client side of SASL, for the broker's own connections to other brokers (Kafka's
broker logs in with the JAAS entry of its inter-broker listener): PLAIN,
SCRAM-SHA-256/512 (RFC 5802, checking the server's nonce and its final signature, as
Kafka's ScramSaslClient does) and OAUTHBEARER (oauth_login.py, with a token kept fresh
by login_refresh.py). The clients are sans-IO, tokens in, tokens out; only an OAuth
login reaches out, to its token endpoint, at start-up and on its refresher thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

from odradek.configdef import ConfigError
from odradek.security.props import listener_view
from odradek.security.sasl.base import SaslFailure
from odradek.security.sasl.jaas import listener_jaas
from odradek.security.sasl.login_refresh import RefreshConfig, RefreshingLogin
from odradek.security.sasl.oauth_login import (
    HANDLER,
    OIDC_LOGIN_HANDLERS,
    TOKEN_ENDPOINT,
    UNSECURED_LOGIN_HANDLER,
    ClientCredentialsLogin,
    LoginFailed,
    OAuthBearerClient,
    UnsecuredLogin,
)
from odradek.security.sasl.scram import HASHES, MIN_ITERATIONS, salted_password

CLIENT_MECHANISMS = ("PLAIN", *HASHES, "OAUTHBEARER")


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self.mechanism = "PLAIN"
        self._token = f"\0{username}\0{password}".encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def evaluate(self, challenge: bytes) -> bytes:
        self.complete = True  # PLAIN has one round; the server's answer is empty
        return b""


def _saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"Unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._expected_signature: bytes | None = None
        self.complete = False

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes:
        text = challenge.decode("utf-8", "replace")
        if self._expected_signature is None:
            return self._final(text)
        return self._check_server_final(text)

    def _final(self, server_first: str) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt_b64, iterations = fields.get("r", ""), fields.get("s"), fields.get("i")
        if "e" in fields:
            raise SaslFailure(f"SCRAM: the server refused: {fields['e']}")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslFailure("SCRAM: the server's nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_b64 or "", validate=True)
            rounds = int(iterations or "")
        except (binascii.Error, ValueError):
            raise SaslFailure("SCRAM: invalid salt or iteration count from the server") from None
        if rounds < MIN_ITERATIONS:
            raise SaslFailure(f"SCRAM: {rounds} iterations is less than {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self._password, salt, rounds)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, text: str) -> bytes:
        if text.startswith("e="):
            raise SaslFailure(f"SCRAM: the server refused: {text[2:]}")
        try:
            got = base64.b64decode(text.removeprefix("v=").split(",")[0], validate=True)
        except binascii.Error:
            got = b""
        assert self._expected_signature is not None
        if not text.startswith("v=") or not hmac.compare_digest(got, self._expected_signature):
            raise SaslFailure("SCRAM: invalid server signature")
        self.complete = True
        return b""


SaslClientFactory = Callable[[], PlainClient | ScramClient | OAuthBearerClient]


def login(props: Mapping[str, str], listener: str, mechanism: str,
          start: bool = True) -> SaslClientFactory:
    """A factory of clients logging in with `listener.name.<l>.<mech>.sasl.jaas.config`
    (the broker's own identity, as Kafka's broker uses it): its `username` and
    `password`, or for OAUTHBEARER the token its login makes. `start=False` only checks
    that the login works (an OAUTHBEARER login then fetches one token and keeps none)."""
    prop = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mechanism} is not "
                          f"supported between brokers (one of {', '.join(CLIENT_MECHANISMS)})")
    module = listener_jaas(props, listener, mechanism)
    if module is None:
        raise ConfigError(f"{prop} is needed: the broker logs in to other brokers with it")
    if mechanism == "OAUTHBEARER":
        return _oauthbearer_login(listener_view(props, listener, mechanism), module.options,
                                  prop, listener, start)
    own = f"listener.name.{listener.lower()}.{mechanism.lower()}.{HANDLER}"
    if own in props:
        raise ConfigError(f"{own}: a login callback handler is supported for OAUTHBEARER "
                          f"only, not {mechanism}")
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ConfigError(f"{prop}: the broker's own username and password are needed "
                          "(it logs in to other brokers with them)")
    if mechanism == "PLAIN":
        return lambda: PlainClient(username, password)
    return lambda: ScramClient(mechanism, username, password)


def _oauthbearer_login(view: Mapping[str, str], options: Mapping[str, str], prop: str,
                       listener: str, start: bool) -> SaslClientFactory:
    handler = view.get(HANDLER, UNSECURED_LOGIN_HANDLER).strip()
    source: UnsecuredLogin | ClientCredentialsLogin
    if handler == UNSECURED_LOGIN_HANDLER:
        if TOKEN_ENDPOINT in view:
            raise ConfigError(f"{TOKEN_ENDPOINT} is set, but the login is the unsecured one: "
                              f"set {HANDLER}={sorted(OIDC_LOGIN_HANDLERS)[0]}")
        source = UnsecuredLogin(options, prop)  # makes one token: its claims must be right
    elif handler in OIDC_LOGIN_HANDLERS:
        source = ClientCredentialsLogin.from_config(view, options, prop)
        if not start:
            try:
                source.fetch()
            except LoginFailed as e:
                raise ConfigError(f"{TOKEN_ENDPOINT}: the broker's OAuth login failed: "
                                  f"{e}") from None
    else:
        raise ConfigError(f"{HANDLER}: unsupported login callback handler {handler} for "
                          "OAUTHBEARER")
    refreshing = RefreshingLogin(source.fetch, source.extensions,
                                 RefreshConfig.from_config(view), listener)
    if start:
        if isinstance(source, UnsecuredLogin):
            refreshing.refresh()  # local, at once; a token from afar comes on its thread
        refreshing.start()
    return refreshing.client
