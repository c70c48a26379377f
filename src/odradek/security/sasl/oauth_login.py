"""The client side of SASL/OAUTHBEARER, for a broker's own login to the other brokers.

Where the token comes from is Kafka's `sasl.login.callback.handler.class`:
- by default Kafka's OAuthBearerUnsecuredLoginCallbackHandler, for development: an
  unsigned JWS (`alg: none`) made from the JAAS options `unsecuredLoginStringClaim_<n>`,
  `…NumberClaim_<n>`, `…ListClaim_<n>`, `unsecuredLoginPrincipalClaimName` (sub),
  `unsecuredLoginLifetimeSeconds` (3600), `unsecuredLoginScopeClaimName` (scope) and
  `unsecuredLoginExtension_<n>`;
- `…oauthbearer.OAuthBearerLoginCallbackHandler` (KIP-768; also its older `…secured.`
  name): a token from `sasl.oauthbearer.token.endpoint.url` — the OAuth
  client_credentials grant with the JAAS `clientId`, `clientSecret` and `scope`
  (retried as HttpAccessTokenRetriever does), or read from a file: URL — checked as
  LoginAccessTokenValidator checks it (three sections, a subject, an expiry).
No secret and no token ever goes into a message or a log line.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import logging
import math
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.configdef import ConfigDef, ConfigError
from odradek.configdef import ConfigType as _T
from odradek.security.sasl.base import SaslFailure

log = logging.getLogger("odradek.security.sasl.login")

MECHANISM = "OAUTHBEARER"
UNSECURED_LOGIN_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                           "OAuthBearerUnsecuredLoginCallbackHandler")
OIDC_LOGIN_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
})
HANDLER = "sasl.login.callback.handler.class"
TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
_SEP = "\x01"
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_RESERVED_CLAIMS = ("iat", "exp")
# HttpAccessTokenRetriever: answers that another try will not change
_UNRETRYABLE_HTTP = frozenset({400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412,
                               413, 414, 415, 501, 505})


class LoginFailed(Exception):
    """No token could be had (the message is for a log line: never a secret)."""


@dataclass(frozen=True)
class LoginToken:
    value: str = field(repr=False)
    principal_name: str
    lifetime_ms: int  # when it expires, ms since the epoch
    start_time_ms: int | None = None


class OAuthBearerClient:
    """Kafka's OAuthBearerSaslClient: one initial response, then either an empty
    answer (done) or the server's RFC 7628 error, which is answered with \\x01."""

    mechanism = MECHANISM

    def __init__(self, token: str, extensions: Mapping[str, str]) -> None:
        self._token = token
        self._extensions = dict(extensions)
        self.complete = False
        self.server_error: str | None = None

    def __repr__(self) -> str:
        return f"OAuthBearerClient(extensions={sorted(self._extensions)})"

    def first(self) -> bytes:
        kvpairs = "".join(f"{k}={v}{_SEP}" for k, v in self._extensions.items())
        return f"n,,{_SEP}auth=Bearer {self._token}{_SEP}{kvpairs}{_SEP}".encode()

    def evaluate(self, challenge: bytes) -> bytes:
        if self.server_error is not None:
            raise SaslFailure("OAUTHBEARER: unexpected message from the server after its "
                              f"error {self.server_error}")
        if not challenge:
            self.complete = True
            return b""
        self.server_error = challenge.decode("utf-8", "replace")[:500]
        return _SEP.encode()  # RFC 7628 3.2.3: the client ends a failed exchange so


def check_extensions(extensions: Mapping[str, str], prop: str) -> dict[str, str]:
    """OAuthBearerClientInitialResponse.validateExtensions."""
    for name, value in extensions.items():
        if name == "auth":
            raise ConfigError(f"{prop}: Extension name auth is invalid")
        if not _EXTENSION_KEY.fullmatch(name):
            raise ConfigError(f"{prop}: Extension name {name} is invalid")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise ConfigError(f"{prop}: Extension value for extension {name} is invalid")
    return dict(extensions)


# ---- the unsecured login ---------------------------------------------------------------

_UNSECURED = "unsecuredLogin"


def _list_claim(value: str) -> list[str]:
    """unsecuredLogin ListClaim: the first character is the delimiter (",a,b" is
    ["a", "b"]); Kafka's String.split drops trailing empty elements, and then adds one
    empty element if the list began or ended with the delimiter or held two in a row."""
    if len(value) <= 1:
        return []
    delimiter, text = value[0], value[1:]
    elements = text.split(delimiter)
    while elements and elements[-1] == "":
        elements.pop()
    if text.startswith(delimiter) or text.endswith(delimiter) or delimiter * 2 in text:
        elements.append("")
    return elements


def unsecured_claims(options: Mapping[str, str], now_ms: int, prop: str) -> dict[str, Any]:
    """The claims Kafka's OAuthBearerUnsecuredLoginCallbackHandler puts in its token."""
    lifetime_raw = options.get(f"{_UNSECURED}LifetimeSeconds", "3600")
    try:
        lifetime = int(lifetime_raw.strip())
    except ValueError:
        raise ConfigError(f"{prop}: {_UNSECURED}LifetimeSeconds: For input string: "
                          f"\"{lifetime_raw}\"") from None
    claims: dict[str, Any] = {"exp": now_ms / 1000.0 + lifetime, "iat": now_ms / 1000.0}
    for key, value in options.items():
        for kind in ("StringClaim_", "NumberClaim_", "ListClaim_"):
            prefix = _UNSECURED + kind
            if not key.startswith(prefix) or len(key) == len(prefix):
                continue
            name = key[len(prefix):]
            if name in _RESERVED_CLAIMS:
                raise ConfigError(f"{prop}: Cannot explicitly set the '{name}' claim")
            if kind == "StringClaim_":
                claims[name] = value
            elif kind == "ListClaim_":
                claims[name] = _list_claim(value)
            else:
                try:
                    number = float(value)
                except ValueError:
                    number = math.nan
                if not math.isfinite(number):
                    raise ConfigError(f"{prop}: {key}: not a number: {value!r}")
                claims[name] = number
    return claims


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class UnsecuredLogin:
    """Tokens as Kafka's development login makes them (for `alg: none` validators)."""

    options: Mapping[str, str]
    prop: str
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.options:
            raise ConfigError(f"{self.prop}: no unsecuredLogin options: this login makes no "
                              "token (it cannot be used to log in to other brokers)")
        if all(k.startswith(f"{_UNSECURED}Extension_") for k in self.options):
            raise ConfigError(f"{self.prop}: Extensions provided in login context without a "
                              "token")
        self.principal_claim = (self.options.get(f"{_UNSECURED}PrincipalClaimName", "").strip()
                                or "sub")
        self.scope_claim = (self.options.get(f"{_UNSECURED}ScopeClaimName", "").strip()
                            or "scope")
        prefix = f"{_UNSECURED}Extension_"
        self.extensions = check_extensions(
            {k[len(prefix):]: v for k, v in self.options.items() if k.startswith(prefix)},
            self.prop)
        self.fetch()  # a token that cannot be made is a configuration error

    def fetch(self) -> LoginToken:
        claims = unsecured_claims(self.options, int(self.clock() * 1000), self.prop)
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise ConfigError(f"{self.prop}: the token has no principal: the "
                              f"'{self.principal_claim}' claim must be a non-blank string "
                              f"(unsecuredLoginStringClaim_{self.principal_claim})")
        scope = claims.get(self.scope_claim)
        if scope is not None and not isinstance(scope, str | list):
            raise ConfigError(f"{self.prop}: the '{self.scope_claim}' claim must be a string "
                              "or a list (unsecuredLoginListClaim_…)")
        header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
        payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
        return LoginToken(f"{header}.{payload}.", principal, int(claims["exp"] * 1000),
                          int(claims["iat"] * 1000))


# ---- the OIDC login (KIP-768) ----------------------------------------------------------

def login_token(token: str, sub_claim: str = "sub", scope_claim: str = "scope") -> LoginToken:
    """Kafka's LoginAccessTokenValidator: the token is not verified here (the brokers
    do that), only read: three non-empty sections, a subject, an expiry."""
    sections = token.strip().split(".")
    if not token.strip():
        raise LoginFailed("Empty JWT provided; expected three sections (header, payload, "
                          "and signature)")
    if len(sections) != 3:
        raise LoginFailed(f"Malformed JWT provided; expected three sections (header, "
                          f"payload, and signature), but {len(sections)} sections provided")
    for section, name in zip(sections, ("header", "payload", "signature"), strict=True):
        if not section.strip():
            raise LoginFailed("Malformed JWT provided; expected at least three sections "
                              f"(header, payload, and signature), but {name} section missing")
    try:
        part = sections[1].strip()
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError):
        raise LoginFailed("Could not validate the access token: malformed JSON") from None
    if not isinstance(claims, dict):
        raise LoginFailed("Could not validate the access token: malformed JSON")
    scope = claims.get(scope_claim)
    scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
    seen: set[str] = set()
    for s in scopes:
        if not isinstance(s, str) or not s.strip():
            raise LoginFailed(f"{scope_claim} value must be a non-blank string")
        if s.strip() in seen:
            raise LoginFailed(f"{scope_claim} value must not contain duplicates - "
                              f"{s.strip()} already present")
        seen.add(s.strip())
    exp, iat, sub = claims.get("exp"), claims.get("iat"), claims.get(sub_claim)
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise LoginFailed("exp value must be a non-null number")
    if exp < 0:
        raise LoginFailed(f"exp value must be non-negative; value given was \"{int(exp)}\"")
    if not isinstance(sub, str) or not sub.strip():
        raise LoginFailed(f"{sub_claim} value must be a non-blank string")
    if iat is not None and (isinstance(iat, bool) or not isinstance(iat, int | float)
                            or iat < 0):
        raise LoginFailed("iat value must be null or non-negative")
    return LoginToken(token.strip(), sub.strip(), int(exp) * 1000,
                      int(iat) * 1000 if iat is not None else None)


def _non_blank(value: str | None, name: str, prop: str) -> str:
    if value is None or not value.strip():
        raise ConfigError(f"{prop}: the {name} option is required (and not blank) for the "
                          "OAuth login")
    return value.strip()


# The broker's own login settings, Kafka's names and ranges (SaslConfigs); read from the
# inter-broker listener's view, so `listener.name.<l>.oauthbearer.` prefixes apply.
LOGIN_SETTINGS = {d.name: d for d in (
    ConfigDef("sasl.login.refresh.window.factor", _T.DOUBLE, 0.8, minimum=0.5, maximum=1.0),
    ConfigDef("sasl.login.refresh.window.jitter", _T.DOUBLE, 0.05, minimum=0.0, maximum=0.25),
    ConfigDef("sasl.login.refresh.min.period.seconds", _T.INT, 60, minimum=0, maximum=900),
    ConfigDef("sasl.login.refresh.buffer.seconds", _T.INT, 300, minimum=0, maximum=3600),
    ConfigDef("sasl.login.retry.backoff.ms", _T.LONG, 100, minimum=0),
    ConfigDef("sasl.login.retry.backoff.max.ms", _T.LONG, 10_000, minimum=0),
    ConfigDef("sasl.login.connect.timeout.ms", _T.INT, None, minimum=0),
    ConfigDef("sasl.login.read.timeout.ms", _T.INT, None, minimum=0),
    ConfigDef("sasl.oauthbearer.header.urlencode", _T.BOOLEAN, False),
)}


def login_setting(props: Mapping[str, str], name: str) -> Any:
    """One of LOGIN_SETTINGS from `props`, typed and range-checked (ConfigError)."""
    definition = LOGIN_SETTINGS[name]
    raw = props.get(name)
    return definition.default if raw is None or not raw.strip() else definition.parse(raw)


@dataclass
class ClientCredentialsLogin:
    """HttpAccessTokenRetriever (and FileTokenRetriever for a file: URL), then
    LoginAccessTokenValidator."""

    url: str
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    scope: str | None = None
    extensions: dict[str, str] = field(default_factory=dict)
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    connect_timeout_ms: int | None = None
    read_timeout_ms: int | None = None
    urlencode_header: bool = False

    @staticmethod
    def from_config(props: Mapping[str, str], options: Mapping[str, str],
                    prop: str) -> ClientCredentialsLogin:
        """`props`: the listener's view for OAUTHBEARER; `options`: its JAAS entry's."""
        url = props.get(TOKEN_ENDPOINT, "").strip()
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https", "file") or (
                parsed.scheme != "file" and not parsed.hostname):
            raise ConfigError(f"{TOKEN_ENDPOINT}: an http, https or file URL is needed for "
                              f"the OAuth login, got {url!r}")
        sub = props.get("sasl.oauthbearer.sub.claim.name", "sub").strip() or "sub"
        scope_claim = props.get("sasl.oauthbearer.scope.claim.name", "scope").strip() or "scope"
        backoff = login_setting(props, "sasl.login.retry.backoff.ms")
        backoff_max = login_setting(props, "sasl.login.retry.backoff.max.ms")
        if backoff_max < backoff:
            raise ConfigError(f"sasl.login.retry.backoff.max.ms ({backoff_max}) is less than "
                              f"sasl.login.retry.backoff.ms ({backoff})")
        unsupported = sorted(k for k in options if k.startswith("ssl."))
        if unsupported:
            raise ConfigError(f"{prop}: {unsupported[0]}: TLS options for the token endpoint "
                              "are not supported (it is verified against the system's CAs)")
        extensions = check_extensions(
            {k[len("extension_"):]: v for k, v in options.items()
             if k.startswith("extension_")}, prop)
        login = ClientCredentialsLogin(
            url, sub_claim=sub, scope_claim=scope_claim, extensions=extensions,
            retry_backoff_ms=backoff, retry_backoff_max_ms=backoff_max,
            connect_timeout_ms=login_setting(props, "sasl.login.connect.timeout.ms"),
            read_timeout_ms=login_setting(props, "sasl.login.read.timeout.ms"),
            urlencode_header=login_setting(props, "sasl.oauthbearer.header.urlencode"))
        if parsed.scheme != "file":
            login.client_id = _non_blank(options.get("clientId"), "clientId", prop)
            login.client_secret = _non_blank(options.get("clientSecret"), "clientSecret", prop)
            scope = options.get("scope")
            login.scope = scope.strip() if scope and scope.strip() else None
        return login

    def fetch(self) -> LoginToken:
        if self.url.startswith("file:"):
            path = Path(urllib.parse.unquote(urllib.parse.urlsplit(self.url).path))
            try:
                raw = path.read_text()
            except OSError as e:
                raise LoginFailed(f"cannot read the token file {path}: {e.strerror}") from None
        else:
            raw = self._retrieve()
        return login_token(raw, self.sub_claim, self.scope_claim)

    def _retrieve(self) -> str:
        """Retry's schedule: backoff doubling from retry.backoff.ms, for at most
        retry.backoff.max.ms overall; an answer that cannot change is not retried."""
        end = time.monotonic() + self.retry_backoff_max_ms / 1000
        attempt = 0
        first_error: LoginFailed | None = None
        while time.monotonic() <= end:
            attempt += 1
            try:
                return self._post()
            except _Unretryable as e:
                first_error = first_error or LoginFailed(str(e))
                break
            except LoginFailed as e:
                first_error = first_error or e
                wait_s = min(self.retry_backoff_ms * 2 ** (attempt - 1) / 1000,
                             end - time.monotonic())
                if wait_s <= 0:
                    break
                log.warning("OAuth token endpoint %s: attempt %d failed (%s); retrying in "
                            "%d ms", self.url, attempt, e, int(wait_s * 1000))
                time.sleep(wait_s)  # the refresher's own thread: nothing else waits on it
        raise first_error or LoginFailed("no attempt to reach the token endpoint was made")

    def _authorization(self) -> str:
        cid, secret = self.client_id, self.client_secret
        if self.urlencode_header:
            cid, secret = urllib.parse.quote_plus(cid), urllib.parse.quote_plus(secret)
        # RFC 7617: the standard alphabet, not the URL-safe one (KAFKA-14496)
        return "Basic " + base64.b64encode(f"{cid}:{secret}".encode()).decode()

    def _post(self) -> str:
        body = "grant_type=client_credentials"
        if self.scope:
            body += "&scope=" + urllib.parse.quote_plus(self.scope)
        parts = urllib.parse.urlsplit(self.url)
        connect_s = self.connect_timeout_ms / 1000 if self.connect_timeout_ms else None
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                               timeout=connect_s,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                              timeout=connect_s)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(self.read_timeout_ms / 1000 if self.read_timeout_ms
                                     else None)
            conn.request("POST", path, body.encode(), {
                "Authorization": self._authorization(), "Accept": "application/json",
                "Cache-Control": "no-cache",
                "Content-Type": "application/x-www-form-urlencoded"})
            answer = conn.getresponse()
            status, text = answer.status, answer.read(1 << 20).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as e:
            raise LoginFailed(f"cannot reach the token endpoint {self.url}: {e}") from None
        finally:
            conn.close()
        if status not in (200, 201):
            error = _error_summary(text)
            if status in _UNRETRYABLE_HTTP:
                raise _Unretryable(f"The response code {status} and error response {error} "
                                   "was encountered reading the token endpoint response; "
                                   "will not attempt further retries")
            raise LoginFailed(f"The unexpected response code {status} and error message "
                              f"{error} was encountered reading the token endpoint response")
        if not text:
            raise LoginFailed(f"The token endpoint response was unexpectedly empty despite "
                              f"response code {status} from {self.url}")
        try:
            token = json.loads(text).get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token.strip():
            raise LoginFailed("The token endpoint response did not contain an access_token "
                              "value")
        return token.strip()


class _Unretryable(LoginFailed):
    pass


def _error_summary(text: str) -> str:
    """RFC 6749 5.2's error answer, which holds nothing secret, as Kafka formats it."""
    if not text.strip():
        return "{}"
    try:
        body = json.loads(text)
    except ValueError:
        return "{" + text[:200] + "}"
    if isinstance(body, dict) and "error" in body:
        return f"{{{json.dumps(body['error'])} - {json.dumps(body.get('error_description'))}}}"
    return text[:200]
