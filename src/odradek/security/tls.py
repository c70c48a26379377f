"""TLS contexts from Kafka's properties, for listeners and for our own clients.

Server side (`ServerTls.from_config(props, listener)`), with Kafka's names and
`listener.name.<l>.` overrides: `ssl.keystore.type` PEM|PKCS12, `ssl.keystore.location`
(PEM: key and chain in one file), `ssl.keystore.certificate.chain` + `ssl.keystore.key`
inline, `ssl.keystore.password`, `ssl.key.password`, `ssl.truststore.type` PEM|PKCS12,
`ssl.truststore.location`, `ssl.truststore.certificates`, `ssl.truststore.password`,
`ssl.client.auth`, `ssl.enabled.protocols`, `ssl.protocol`, `ssl.cipher.suites`,
`ssl.endpoint.identification.algorithm`, `ssl.principal.mapping.rules`.

`ServerTls.context` is the one context to hand to the listener; every handshake picks up
the newest certificates (switched in the server-name callback), so
`reload_if_changed()` renews keystore and truststore without a restart, as Kafka's
dynamic `ssl.keystore.*` does. `principal(ssl_object)` is the connection's principal.

Client side: `client_context(props)` reads Kafka client properties, librdkafka's
(`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
`ssl.ca.pem`, …, `enable.ssl.certificate.verification`) or Java's (`ssl.truststore.*`,
`ssl.keystore.*`), for the tools that speak to brokers themselves.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.configdef import ConfigError
from odradek.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper, rfc2253_name
from odradek.security.props import listener_view, parse_list

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                          "TLS_CHACHA20_POLY1305_SHA256"})
# Kafka (Java) names the TLS 1.2 suites by their IANA names; OpenSSL by its own.
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
}

# Every ssl.* broker property this module honours (the rest must be refused at start-up).
SERVER_PROPERTIES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
})


def _fail(prop: str, why: str) -> ConfigError:
    return ConfigError(f"{prop}: {why}")


# --- reading keys and certificates ---------------------------------------------------

@dataclass(frozen=True)
class KeyMaterial:
    key_pem: bytes  # PKCS#8, encrypted with `password`
    chain_pem: bytes
    password: bytes
    leaf_subject: str


def _read(prop: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise _fail(prop, f"cannot read {location}: {e.strerror or e}") from None


def _pem_certs(prop: str, data: bytes) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise _fail(prop, "no valid PEM certificate found") from None
    return certs


def _pem_key(prop: str, data: bytes, password: str | None) -> object:
    start = data.find(b"-----BEGIN")
    blocks = [b for b in data[start:].split(b"-----END") if b"PRIVATE KEY" in b]
    if not blocks:
        raise _fail(prop, "no PEM private key found")
    block = blocks[0][blocks[0].find(b"-----BEGIN"):]
    kind = block.split(b"-----", 2)[1]
    pem = block + b"-----END" + kind.replace(b"BEGIN", b"", 1) + b"-----\n"
    try:
        return serialization.load_pem_private_key(
            pem, password.encode() if password else None)
    except TypeError:
        raise _fail("ssl.key.password", "the private key is encrypted: set ssl.key.password"
                    if not password else "the private key is not encrypted") from None
    except ValueError:
        raise _fail("ssl.key.password" if password else prop,
                    "cannot decrypt the private key (wrong ssl.key.password?)"
                    if password else "invalid private key") from None


def _material(key: object, certs: list[x509.Certificate]) -> KeyMaterial:
    password = secrets.token_hex(16).encode()
    key_pem = key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password))
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return KeyMaterial(key_pem, chain, password, rfc2253_name(certs[0].subject))


def _keystore(view: Mapping[str, str]) -> tuple[KeyMaterial | None, list[str]]:
    """The key and chain, and the files they came from (watched for reload)."""
    ktype = view.get("ssl.keystore.type", "JKS").upper()
    location = view.get("ssl.keystore.location")
    chain_inline = view.get("ssl.keystore.certificate.chain")
    key_inline = view.get("ssl.keystore.key")
    key_password = view.get("ssl.key.password")
    if chain_inline or key_inline:
        if ktype != "PEM":
            raise _fail("ssl.keystore.type", "must be PEM with ssl.keystore.certificate.chain")
        if not (chain_inline and key_inline):
            raise _fail("ssl.keystore.key" if chain_inline else "ssl.keystore.certificate.chain",
                        "inline PEM keystores need both ssl.keystore.certificate.chain "
                        "and ssl.keystore.key")
        if location:
            raise _fail("ssl.keystore.location", "cannot be combined with an inline keystore")
        certs = _pem_certs("ssl.keystore.certificate.chain", chain_inline.encode())
        key = _pem_key("ssl.keystore.key", key_inline.encode(), key_password)
        return _material(key, certs), []
    if not location:
        return None, []
    if ktype == "PEM":
        data = _read("ssl.keystore.location", location)
        certs = _pem_certs("ssl.keystore.location", data)
        key = _pem_key("ssl.keystore.location", data, key_password)
        return _material(key, certs), [location]
    if ktype == "PKCS12":
        data = _read("ssl.keystore.location", location)
        password = view.get("ssl.keystore.password")
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password else None)
        except ValueError:
            raise _fail("ssl.keystore.password",
                        f"cannot open the PKCS12 keystore {location} (wrong password?)") from None
        if key is None or cert is None:
            raise _fail("ssl.keystore.location", f"{location} holds no private key entry")
        return _material(key, [cert, *extra]), [location]
    raise _fail("ssl.keystore.type", f"{ktype} is not supported (use PEM or PKCS12)")


def _truststore(view: Mapping[str, str], prefix: str = "ssl.truststore") -> tuple[
        bytes | None, list[str]]:
    """Trusted CA certificates as PEM, and the file they came from."""
    ttype = view.get(f"{prefix}.type", "JKS").upper()
    location = view.get(f"{prefix}.location")
    inline = view.get(f"{prefix}.certificates")
    if inline:
        if ttype != "PEM":
            raise _fail(f"{prefix}.type", f"must be PEM with {prefix}.certificates")
        certs = _pem_certs(f"{prefix}.certificates", inline.encode())
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs), []
    if not location:
        return None, []
    data = _read(f"{prefix}.location", location)
    if ttype == "PEM":
        certs = _pem_certs(f"{prefix}.location", data)
    elif ttype == "PKCS12":
        password = view.get(f"{prefix}.password")
        try:
            _, cert, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password else None)
        except ValueError:
            raise _fail(f"{prefix}.password",
                        f"cannot open the PKCS12 truststore {location} (wrong password?)") from None
        certs = ([cert] if cert else []) + list(extra)
        if not certs:
            raise _fail(f"{prefix}.location", f"{location} holds no certificate")
    else:
        raise _fail(f"{prefix}.type", f"{ttype} is not supported (use PEM or PKCS12)")
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs), [location]


@contextlib.contextmanager
def _files(material: KeyMaterial) -> Iterator[tuple[str, str]]:
    """load_cert_chain reads files: write the (encrypted) key and chain to a private
    temporary directory for the duration of the call."""
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as d:
        os.chmod(d, 0o700)
        cert, key = Path(d, "chain.pem"), Path(d, "key.pem")
        cert.write_bytes(material.chain_pem)
        key.write_bytes(material.key_pem)
        yield str(cert), str(key)


def _load_key(ctx: ssl.SSLContext, material: KeyMaterial, prop: str) -> None:
    with _files(material) as (cert, key):
        try:
            ctx.load_cert_chain(cert, key, password=material.password)
        except ssl.SSLError as e:
            raise _fail(prop, f"the key does not match the certificate ({e.reason})") from None


def _protocols(ctx: ssl.SSLContext, view: Mapping[str, str]) -> list[str]:
    protocol = view.get("ssl.protocol", "TLSv1.3")
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise _fail("ssl.protocol", f"{protocol} is not supported (TLS, TLSv1.2, TLSv1.3)")
    enabled = parse_list(view.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
    if not enabled:
        raise _fail("ssl.enabled.protocols", "must name at least one protocol")
    for p in enabled:
        if p not in PROTOCOLS:
            raise _fail("ssl.enabled.protocols",
                        f"{p} is not supported (TLSv1.2, TLSv1.3)")
    versions = sorted(PROTOCOLS[p] for p in enabled)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    return enabled


def _ciphers(ctx: ssl.SSLContext, view: Mapping[str, str], enabled: list[str]) -> None:
    suites = parse_list(view.get("ssl.cipher.suites"))
    if not suites:
        return
    tls13 = {s for s in suites if s in TLS13_SUITES}
    tls12 = [s for s in suites if s not in TLS13_SUITES]
    if "TLSv1.3" in enabled and tls13 != TLS13_SUITES:
        raise _fail("ssl.cipher.suites", "TLS 1.3 suites cannot be restricted here: list all "
                    f"of {', '.join(sorted(TLS13_SUITES))} or leave TLSv1.3 out of "
                    "ssl.enabled.protocols")
    if "TLSv1.2" in enabled:
        names = [IANA_TO_OPENSSL.get(s, s) for s in tls12]
        if not names:
            raise _fail("ssl.cipher.suites", "no TLS 1.2 suite listed while TLSv1.2 is enabled")
        try:
            ctx.set_ciphers(":".join(names))
        except ssl.SSLError:
            raise _fail("ssl.cipher.suites", f"no usable suite in {', '.join(tls12)}") from None


def _endpoint_algorithm(view: Mapping[str, str]) -> bool:
    value = view.get("ssl.endpoint.identification.algorithm", "https").strip()
    if value.lower() not in ("https", ""):
        raise _fail("ssl.endpoint.identification.algorithm",
                    f"{value!r} is not supported (https or empty)")
    return value.lower() == "https"


# --- the listener's side ------------------------------------------------------------

@dataclass(frozen=True)
class _Fingerprint:
    path: str
    mtime_ns: int
    size: int
    digest: bytes


def _fingerprint(path: str) -> _Fingerprint | None:
    try:
        st = os.stat(path)
        return _Fingerprint(path, st.st_mtime_ns, st.st_size,
                            hashlib.sha256(Path(path).read_bytes()).digest())
    except OSError:
        return None


@dataclass
class ServerTls:
    props: dict[str, str]
    listener: str | None
    mapper: SslPrincipalMapper
    client_auth: str
    context: ssl.SSLContext = field(repr=False)
    _current: ssl.SSLContext = field(repr=False)
    _watched: dict[str, _Fingerprint | None] = field(default_factory=dict, repr=False)

    @staticmethod
    def from_config(props: Mapping[str, str], listener: str | None = None) -> ServerTls:
        view = listener_view(props, listener)
        mapper = SslPrincipalMapper(view.get("ssl.principal.mapping.rules", "DEFAULT"))
        client_auth = view.get("ssl.client.auth", "none").strip().lower()
        if client_auth not in CLIENT_AUTH:
            raise _fail("ssl.client.auth", f"{client_auth!r} is not one of none, requested, "
                        "required")
        current, files = ServerTls._build(view, client_auth)
        outer, _ = ServerTls._build(view, client_auth)
        tls = ServerTls(dict(props), listener, mapper, client_auth, outer, current,
                        {f: _fingerprint(f) for f in files})
        outer.sni_callback = tls._switch
        return tls

    @staticmethod
    def _build(view: Mapping[str, str], client_auth: str) -> tuple[ssl.SSLContext, list[str]]:
        _endpoint_algorithm(view)
        material, key_files = _keystore(view)
        if material is None:
            raise _fail("ssl.keystore.location", "an SSL listener needs a keystore "
                        "(ssl.keystore.location or ssl.keystore.certificate.chain)")
        cadata, trust_files = _truststore(view)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        enabled = _protocols(ctx, view)
        _ciphers(ctx, view, enabled)
        _load_key(ctx, material, "ssl.keystore.location")
        ctx.verify_mode = CLIENT_AUTH[client_auth]
        if cadata is not None:
            ctx.load_verify_locations(cadata=cadata.decode())
        elif client_auth != "none":
            raise _fail("ssl.truststore.location",
                        f"ssl.client.auth={client_auth} needs a truststore to verify clients")
        return ctx, key_files + trust_files

    def _switch(self, sslobj: ssl.SSLObject | ssl.SSLSocket, _name: str | None,
                _ctx: ssl.SSLContext) -> None:
        # called on every ClientHello: hand the handshake the newest certificates
        sslobj.context = self._current

    def files_changed(self) -> bool:
        return any(_fingerprint(f) != fp for f, fp in self._watched.items())

    def reload_if_changed(self) -> bool:
        """Rebuild from the same properties if a keystore or truststore file changed.
        True when new connections now get the new material; a broken new file raises
        ConfigError and the old material stays in use."""
        if not self.files_changed():
            return False
        view = listener_view(self.props, self.listener)
        current, files = self._build(view, self.client_auth)
        self._current = current
        self._watched = {f: _fingerprint(f) for f in files}
        return True

    def principal(self, ssl_object: ssl.SSLObject | ssl.SSLSocket) -> KafkaPrincipal:
        """`User:<mapped subject>` of the client certificate; ANONYMOUS without one."""
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return ANONYMOUS
        subject = rfc2253_name(x509.load_der_x509_certificate(der).subject)
        return self.mapper.principal(subject)


# --- our own clients' side ----------------------------------------------------------

def client_context(props: Mapping[str, str]) -> ssl.SSLContext | None:
    """The TLS context a Kafka client with these properties would use; None when
    `security.protocol` is PLAINTEXT or SASL_PLAINTEXT."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise _fail("security.protocol", f"{protocol!r} is not one of PLAINTEXT, SSL, "
                    "SASL_PLAINTEXT, SASL_SSL")
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, props)
    verify = props.get("enable.ssl.certificate.verification", "true").lower()
    if verify not in ("true", "false"):
        raise _fail("enable.ssl.certificate.verification", f"{verify!r} is not true or false")
    ctx.check_hostname = _endpoint_algorithm(props) and verify == "true"
    ctx.verify_mode = ssl.CERT_REQUIRED if verify == "true" else ssl.CERT_NONE
    cadata: bytes | None
    if props.get("ssl.ca.location"):
        cadata = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in _pem_certs(
            "ssl.ca.location", _read("ssl.ca.location", props["ssl.ca.location"])))
    elif props.get("ssl.ca.pem"):
        cadata = props["ssl.ca.pem"].encode()
        _pem_certs("ssl.ca.pem", cadata)
    else:
        cadata, _ = _truststore(props)
    if cadata is not None:
        ctx.load_verify_locations(cadata=cadata.decode())
    else:
        ctx.load_default_certs()
    cert_loc, key_loc = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    cert_pem, key_pem = props.get("ssl.certificate.pem"), props.get("ssl.key.pem")
    if cert_loc or key_loc or cert_pem or key_pem:
        cert_data = (_read("ssl.certificate.location", cert_loc) if cert_loc
                     else (cert_pem or "").encode())
        key_data = _read("ssl.key.location", key_loc) if key_loc else (key_pem or "").encode()
        if not cert_data or not key_data:
            raise _fail("ssl.key.location" if cert_data else "ssl.certificate.location",
                        "a client certificate needs both a certificate and a key")
        material = _material(_pem_key("ssl.key.location", key_data,
                                      props.get("ssl.key.password")),
                             _pem_certs("ssl.certificate.location", cert_data))
        _load_key(ctx, material, "ssl.certificate.location")
    else:
        keystore, _ = _keystore(props)
        if keystore is not None:
            _load_key(ctx, keystore, "ssl.keystore.location")
    return ctx
