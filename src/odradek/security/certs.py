"""A local certificate authority: CA, broker and client certificates with `cryptography`,
as PEM and PKCS12, for tests and for `odradek cluster up --secure`."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: PrivateKey
    chain: tuple[x509.Certificate, ...] = ()  # issuers above `cert`, nearest first

    def cert_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM)
                        for c in (self.cert, *self.chain))

    def key_pem(self, password: str | None = None) -> bytes:
        """PKCS#8, encrypted when a password is given (what Kafka's PEM keystore wants
        with `ssl.key.password`)."""
        enc: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8, enc)

    def pkcs12(self, password: str, name: str = "odradek") -> bytes:
        return pkcs12.serialize_key_and_certificates(
            name.encode(), self.key, self.cert, list(self.chain) or None,
            serialization.BestAvailableEncryption(password.encode()))

    def write_pem(self, directory: Path, stem: str, key_password: str | None = None) -> Path:
        """`<stem>.pem` with the key and the chain in one file (Kafka's PEM keystore
        layout), plus `<stem>.crt` and `<stem>.key` separately for librdkafka."""
        directory.mkdir(parents=True, exist_ok=True)
        combined = directory / f"{stem}.pem"
        _write_private(combined, self.key_pem(key_password) + self.cert_pem())
        (directory / f"{stem}.crt").write_bytes(self.cert_pem())
        _write_private(directory / f"{stem}.key", self.key_pem(key_password))
        return combined


def _write_private(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _name(cn: str, ou: str | None, org: str | None) -> x509.Name:
    attrs = []
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
             days: int, not_before: dt.datetime | None) -> x509.CertificateBuilder:
    start = not_before or dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days)))


def make_ca(cn: str = "odradek local CA", days: int = 3650, org: str | None = "odradek") -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(cn, None, org)
    cert = (_builder(name, name, key.public_key(), days, None)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca: Issued, cn: str, *, hosts: Sequence[str] = (), ou: str | None = None,
          org: str | None = None, days: int = 825, not_before: dt.datetime | None = None,
          server: bool = True, client: bool = True) -> Issued:
    """A leaf certificate signed by `ca`; `hosts` (names or IP addresses) become the
    subject alternative names a client's hostname check looks at."""
    key = ec.generate_private_key(ec.SECP256R1())
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    builder = (_builder(_name(cn, ou, org), ca.cert.subject, key.public_key(), days, not_before)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca.key.public_key()), critical=False))
    if hosts:
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key, (ca.cert, *ca.chain))


def broker_cert(ca: Issued, broker: str = "localhost", hosts: Sequence[str] = (
        "localhost", "127.0.0.1", "::1")) -> Issued:
    return issue(ca, broker, hosts=hosts, ou="brokers", org="odradek")


def client_cert(ca: Issued, user: str, ou: str | None = "clients") -> Issued:
    return issue(ca, user, ou=ou, org="odradek", server=False)


@dataclass(frozen=True)
class Bundle:
    """Files for a secured local cluster: the CA, one PEM keystore per broker, one key
    pair per user, and the properties that point at them."""

    directory: Path
    ca_path: Path
    broker_keystores: dict[str, Path]
    user_certs: dict[str, tuple[Path, Path]]  # user -> (certificate, key)

    def broker_properties(self, broker: str, listener: str | None = None) -> dict[str, str]:
        """Kafka broker properties for TLS with required client certificates."""
        prefix = f"listener.name.{listener.lower()}." if listener else ""
        return {f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.location": str(self.broker_keystores[broker]),
                f"{prefix}ssl.truststore.type": "PEM",
                f"{prefix}ssl.truststore.location": str(self.ca_path),
                f"{prefix}ssl.client.auth": "required"}

    def client_properties(self, user: str, protocol: str = "SSL") -> dict[str, str]:
        """Kafka client properties (librdkafka's names) for `user`."""
        cert, key = self.user_certs[user]
        return {"security.protocol": protocol, "ssl.ca.location": str(self.ca_path),
                "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}


def write_bundle(directory: Path, brokers: Sequence[str] = ("localhost",),
                 users: Sequence[str] = ("admin",),
                 hosts: Sequence[str] = ("localhost", "127.0.0.1", "::1")) -> Bundle:
    """Make a CA, a certificate per broker (valid for `hosts` and its own name) and per
    user, and write them under `directory` (private files mode 0600)."""
    ca = make_ca()
    directory.mkdir(parents=True, exist_ok=True)
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca.cert_pem())
    keystores = {b: broker_cert(ca, b, tuple(dict.fromkeys((b, *hosts)))).write_pem(
        directory, f"broker-{b}") for b in brokers}
    user_certs = {}
    for u in users:
        client_cert(ca, u).write_pem(directory, f"user-{u}")
        user_certs[u] = (directory / f"user-{u}.crt", directory / f"user-{u}.key")
    return Bundle(directory, ca_path, keystores, user_certs)
