"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer does it.

Credentials are stored salted, never as passwords: `ScramCredential` holds salt,
StoredKey, ServerKey and iterations, and prints as Kafka's
`salt=…,stored_key=…,server_key=…,iterations=…` (the value of `SCRAM-SHA-512` in
ZooKeeper's `/config/users/<user>`). Messages are parsed with Kafka's own grammar; the
client's nonce must prefix the final nonce, iterations must be at least 4096, and the
`tokenauth` extension (delegation tokens) is refused unless a token lookup is given.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.security.sasl.base import (
    SaslFailure,
    SaslServer,
    generic_failure,
    secure_random_string,
)

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts, as Kafka's controller
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = tuple(HASHES)
# AlterUserScramCredentials / DescribeUserScramCredentials mechanism codes
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        """ScramCredentialUtils.credentialToString: Kafka's stored form."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"  # keys stay out of logs

    @staticmethod
    def parse(text: str) -> ScramCredential:
        props: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError("SCRAM credential: expected key=value pairs")
            props[key.strip()] = value.strip()
        try:
            return ScramCredential(_unb64(props["salt"]), _unb64(props["stored_key"]),
                                   _unb64(props["server_key"]), int(props["iterations"]))
        except KeyError as e:
            raise ValueError(f"SCRAM credential: missing {e.args[0]}") from None
        except (binascii.Error, ValueError):
            raise ValueError("SCRAM credential: invalid salt, key or iterations") from None


def _hash(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(f"Unsupported SCRAM mechanism {mechanism}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): Kafka normalizes a password to its UTF-8 bytes only."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _hash(mechanism)).digest()


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(_hash(mechanism), client_key).digest()
    server_key = _hmac(mechanism, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A stored credential from a password (kafka-configs.sh `SCRAM-SHA-512=[password=…]`)."""
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum "
                         f"{MIN_ITERATIONS} for {mechanism}")
    salt = salt if salt is not None else secure_random_string().encode()
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


# --- /config/users/<user> -----------------------------------------------------------

def user_config_value(config: Mapping[str, str], mechanism: str,
                      credential: ScramCredential | None) -> bytes:
    """The znode value `{"version":1,"config":{…}}` with one mechanism set (or removed
    when `credential` is None); other entries (quotas) are kept."""
    merged = dict(config)
    if credential is None:
        merged.pop(mechanism, None)
    else:
        merged[mechanism] = str(credential)
    return json.dumps({"version": 1, "config": merged}, separators=(",", ":")).encode()


def parse_user_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    js = json.loads(data)
    config = js.get("config", {}) if isinstance(js, dict) else {}
    return {str(k): str(v) for k, v in config.items()}


def credentials_from_user_config(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    return {m: ScramCredential.parse(config[m]) for m in MECHANISMS if m in config}


# --- messages, with Kafka's ScramMessages grammar ---------------------------------

_VALUE_SAFE_CHARS = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # \x01-\x7F except , and =
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # except ,
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = rf"(?:{_VALUE_SAFE_CHARS}|=2C|=3D)+"
_B64C = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64C}{{4}})*(?:{_B64C}{{3}}=|{_B64C}{{2}}==)?"
_RESERVED = rf"(m={_VALUE},)?"
_EXTENSIONS = rf"(,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


def username(saslname: str) -> str:
    """ScramFormatter.username: undo RFC 5802's =2C and =3D escapes."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(",")[1:] if text.startswith(",") else []:
        key, _, value = part.partition("=")
        out[key] = value
    return out


CredentialLookup = Callable[[str], ScramCredential | None]
# a delegation token id → (owner, its credential, expiry ms), when tokens are enabled
TokenLookup = Callable[[str], tuple[str, ScramCredential, int] | None]


class ScramServer(SaslServer):
    def __init__(self, mechanism: str, credentials: CredentialLookup,
                 tokens: TokenLookup | None = None) -> None:
        super().__init__()
        _hash(mechanism)
        self.mechanism = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._credential: ScramCredential | None = None
        self.extensions: dict[str, str] = {}

    def _evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise generic_failure(self.mechanism, "SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        return self._final(text)

    def _first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            # the first message holds no secret: Kafka logs it whole
            raise generic_failure(self.mechanism,
                                  f"Invalid SCRAM client first message format: {text}")
        self.extensions = _extensions(m.group("extensions"))
        name = username(m.group("saslname"))
        authzid = m.group("authzid") or ""
        if self.extensions.get("tokenauth", "").lower() == "true":
            found = self._tokens(name) if self._tokens is not None else None
            if found is None:
                raise generic_failure(
                    self.mechanism, f"Token Authentication failed: Invalid tokenId : {name}")
            owner, credential, expiry = found
            self.authorization_id = owner
            self.credential_expiry_ms = expiry
        else:
            credential = self._credentials(name)  # type: ignore[assignment]
            self.authorization_id = name
        if credential is None:
            raise generic_failure(self.mechanism,
                                  f"Authentication failed: Invalid user credentials for {name!r}")
        if authzid and username(authzid) != name:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise generic_failure(
                self.mechanism, f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism}")
        self._credential = credential
        # gs2-header is "n," [authzid] ","; the rest, as the client sent it, is the bare
        # message the signatures cover
        self._gs2_header = f"n,{m.group(1) or ''},"
        self._client_first_bare = text[len(self._gs2_header):]
        nonce = m.group("nonce") + secure_random_string()
        self._server_first = (f"r={nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        self._nonce = nonce
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise generic_failure(self.mechanism, "Invalid SCRAM client final message format")
        # Kafka's ScramSaslServer checks only that the final nonce ends with the combined
        # one (RFC 5802 wants it exact): librdkafka up to 2.0 repeats the client's part in
        # front of it, and Kafka accepts that. The proof still covers the whole message.
        if not m.group("nonce").endswith(self._nonce):
            raise generic_failure(self.mechanism,
                                  "Invalid client nonce in the final client message.")
        if _unb64(m.group("channel")) != self._gs2_header.encode():
            raise generic_failure(self.mechanism, "Invalid channel binding in the final "
                                  "client message.")
        credential = self._credential
        assert credential is not None
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        proof = _unb64(m.group("proof"))
        if len(proof) != len(client_signature):
            raise generic_failure(self.mechanism, "Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(_hash(self.mechanism), client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise generic_failure(
                self.mechanism, f"Invalid client credentials for {self.authorization_id!r}")
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        self._credential = None
        self.complete = True
        return f"v={_b64(server_signature)}".encode()


def random_salt() -> bytes:
    return secrets.token_bytes(32)
