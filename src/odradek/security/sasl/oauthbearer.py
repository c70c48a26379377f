"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer.

The client's first message `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]*\x01`
is parsed with Kafka's grammar. The token is checked by a validator:
`UnsecuredJwsValidator` is Kafka's development validator (`alg: none`, options
`unsecuredValidatorPrincipalClaimName`, `…ScopeClaimName`, `…RequiredScope`,
`…AllowableClockSkewMs`); `JwksValidator` checks a signed JWT against a JWKS file as
Kafka's OAuthBearerValidatorCallbackHandler does (`sasl.oauthbearer.jwks.endpoint.url`,
`…expected.audience`, `…expected.issuer`, `…sub.claim.name`, `…scope.claim.name`,
`…clock.skew.seconds`). A refused token answers the RFC 7628 JSON error
(`{"status":"invalid_token"}`); the client's `\x01` then ends the exchange failed.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from odradek.configdef import ConfigError
from odradek.security.sasl.base import SaslFailure, SaslServer, generic_failure

MECHANISM = "OAUTHBEARER"
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_KVPAIRS = rf"({_KEY}={_VALUE}{_SEP})*"
_INITIAL = re.compile(rf"n,(a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>{_KVPAIRS}){_SEP}")
_AUTH = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+(=*))")


@dataclass(frozen=True)
class InitialResponse:
    authorization_id: str
    token: str
    extensions: dict[str, str]


def parse_initial_response(data: bytes) -> InitialResponse:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message") from None
    m = _INITIAL.fullmatch(text)
    if m is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in m.group("kvpairs").split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise ValueError(
            f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
    return InitialResponse(m.group("authzid") or "", am.group("token"), props)


@dataclass(frozen=True)
class OAuthToken:
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int
    start_time_ms: int | None = None


class TokenInvalid(Exception):
    """A refused token: `status`/`scope` go to the client, the message to the log."""

    def __init__(self, detail: str, status: str = "invalid_token",
                 scope: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    def validate(self, token: str) -> OAuthToken: ...


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise TokenInvalid(f"Invalid {what}: {e}") from None
    if not isinstance(value, dict):
        raise TokenInvalid(f"Invalid {what}: not a JSON object")
    return value


def _scope_of(claims: Mapping[str, Any], claim: str) -> frozenset[str]:
    value = claims.get(claim)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise TokenInvalid(f"The scope claim ({claim}) has an invalid type")


def _number(claims: Mapping[str, Any], claim: str) -> float | None:
    value = claims.get(claim)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenInvalid(f"The {claim} claim is not a number")
    return float(value)


def _list_option(value: str) -> list[str]:
    return [v for v in re.split(r"[\s,]+", value.strip()) if v]


@dataclass
class UnsecuredJwsValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: for development only."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: list[str] = field(default_factory=list)
    clock_skew_ms: int = 0
    clock: Callable[[], float] = time.time

    @staticmethod
    def from_jaas_options(options: Mapping[str, str]) -> UnsecuredJwsValidator:
        skew_raw = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew = int(skew_raw)
        except ValueError:
            skew = -1
        if skew < 0:
            raise ConfigError("unsecuredValidatorAllowableClockSkewMs: must be a "
                              f"non-negative integer, got {skew_raw!r}")
        return UnsecuredJwsValidator(
            options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub",
            options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope",
            _list_option(options.get("unsecuredValidatorRequiredScope", "")), skew)

    def validate(self, token: str) -> OAuthToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenInvalid("Unsecured JWS compact serializations must have 3 dot-separated "
                               f"Base64URL-encoded values, got {len(parts)}")
        header = _b64url_json(parts[0], "JWS header")
        claims = _b64url_json(parts[1], "JWS payload")
        if parts[2]:
            raise TokenInvalid("Unsecured JWS must have an empty signature")
        if header.get("alg") != "none":
            raise TokenInvalid("Unsecured JWS must have alg \"none\"")
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise TokenInvalid(f"Required claim missing: {self.principal_claim}")
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"The {self.principal_claim} claim must be a non-empty string")
        now_ms = int(self.clock() * 1000)
        now_exact_ms = self.clock() * 1000
        iat = _number(claims, "iat")
        exp = _number(claims, "exp")
        if iat is not None and 1000 * iat > now_exact_ms + self.clock_skew_ms:
            raise TokenInvalid(f"The Issued At value ({iat:f} seconds) was after the indicated "
                               f"time ({now_ms} ms) plus allowable clock skew "
                               f"({self.clock_skew_ms} ms)")
        if exp is None:
            raise TokenInvalid("Required claim missing: exp")
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise TokenInvalid(f"The indicated time ({now_ms} ms) minus allowable clock skew "
                               f"({self.clock_skew_ms} ms) was on or after the Expiration Time "
                               f"value ({exp:f} seconds)")
        if iat is not None and exp <= iat:
            raise TokenInvalid(f"The Expiration Time time ({exp:f} seconds) was not after the "
                               f"Issued At time ({iat:f} seconds)")
        scope = _scope_of(claims, self.scope_claim)
        for needed in self.required_scope:
            if needed not in scope:
                raise TokenInvalid(
                    f"The provided scope ({sorted(scope)}) was missing a required scope "
                    f"({needed}).  All required scope elements: {self.required_scope}",
                    status="insufficient_scope", scope=f"[{', '.join(self.required_scope)}]")
        return OAuthToken(principal, scope, int(exp * 1000),
                          int(iat * 1000) if iat is not None else None)


@dataclass
class JwksValidator:
    """A signed JWT checked against a JWKS (RFC 7517) document's keys."""

    jwks: Mapping[str, Any]
    expected_audience: list[str] = field(default_factory=list)
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30
    clock: Callable[[], float] = time.time

    @staticmethod
    def from_config(props: Mapping[str, str]) -> JwksValidator:
        url = props.get("sasl.oauthbearer.jwks.endpoint.url", "")
        if not url.startswith("file:"):
            raise ConfigError("sasl.oauthbearer.jwks.endpoint.url: only a file: URL of a JWKS "
                              f"file is supported, got {url!r}")
        path = Path(url.removeprefix("file://") if url.startswith("file://") else url[5:])
        try:
            jwks = json.loads(path.read_text())
            if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
                raise ValueError("no \"keys\" list")
        except (OSError, ValueError) as e:
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: cannot read a JWKS from "
                              f"{path}: {e}") from None
        skew_raw = props.get("sasl.oauthbearer.clock.skew.seconds", "30")
        if not skew_raw.strip().isdigit():
            raise ConfigError(f"sasl.oauthbearer.clock.skew.seconds: expected a non-negative "
                              f"integer, got {skew_raw!r}")
        return JwksValidator(
            jwks, _list_option(props.get("sasl.oauthbearer.expected.audience", "")),
            props.get("sasl.oauthbearer.expected.issuer") or None,
            props.get("sasl.oauthbearer.sub.claim.name", "sub") or "sub",
            props.get("sasl.oauthbearer.scope.claim.name", "scope") or "scope",
            int(skew_raw))

    def validate(self, token: str) -> OAuthToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenInvalid(f"Malformed JWT: {e}") from None
        alg = header.get("alg")
        if not alg or alg == "none":
            raise TokenInvalid("The JWT is not signed")
        keys = [k for k in self.jwks.get("keys", [])
                if header.get("kid") is None or k.get("kid") == header.get("kid")]
        if not keys:
            raise TokenInvalid(f"No key in the JWKS for kid {header.get('kid')!r}")
        last: Exception | None = None
        for jwk in keys:
            if jwk.get("alg") not in (None, alg):
                continue
            try:
                key = jwt.PyJWK(jwk, algorithm=alg)
                claims = jwt.decode(
                    token, key.key, algorithms=[alg],
                    audience=self.expected_audience or None, issuer=self.expected_issuer,
                    leeway=self.clock_skew_s,
                    options={"require": ["exp", self.sub_claim],
                             "verify_aud": bool(self.expected_audience)})
                break
            except jwt.PyJWTError as e:
                last = e
        else:
            raise TokenInvalid(f"The JWT did not verify: {last}")
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"The {self.sub_claim} claim must be a non-empty string")
        iat = claims.get("iat")
        return OAuthToken(principal, _scope_of(claims, self.scope_claim),
                          int(float(claims["exp"]) * 1000),
                          int(float(iat) * 1000) if isinstance(iat, int | float) else None)


class OAuthBearerServer(SaslServer):
    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        super().__init__()
        self._validator = validator
        self._error: str | None = None
        self.extensions: dict[str, str] = {}
        self.token: OAuthToken | None = None
        self.last_detail = ""  # why the last token was refused, for the log

    def _evaluate(self, response: bytes) -> bytes:
        if response == _SEP.encode() and self._error is not None:
            raise SaslFailure(self._error, f"{self._error}: {self.last_detail}")
        self._error = None
        try:
            initial = parse_initial_response(response)
        except ValueError as e:
            raise generic_failure(self.mechanism, str(e)) from None
        try:
            token = self._validator.validate(initial.token)
        except TokenInvalid as e:
            error = f'{{"status":"{e.status}"'
            if e.scope is not None:
                error += f', "scope":"{e.scope}"'
            self._error = error + "}"
            self.last_detail = str(e)  # for the log: never the token itself
            return self._error.encode()
        if initial.authorization_id and initial.authorization_id != token.principal_name:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id "
                f"({initial.authorization_id}) that is different from the token's principal "
                f"name ({token.principal_name})")
        self.token = token
        self.extensions = initial.extensions
        self.authorization_id = token.principal_name
        self.credential_expiry_ms = token.lifetime_ms
        self.complete = True
        return b""
