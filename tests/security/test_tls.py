"""TLS from Kafka's properties, with real handshakes on loopback: our client context,
Python's ssl and the openssl command line as peers; certificates made by certs.py."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.configdef import ConfigError
from odradek.security import certs
from odradek.security.tls import ServerTls, client_context


@dataclass
class Pki:
    dir: Path
    ca: certs.Issued
    broker: certs.Issued
    alice: certs.Issued
    stranger: certs.Issued  # signed by another CA

    def client(self, who: certs.Issued | None, ca: Path | None = None) -> dict[str, str]:
        props = {"security.protocol": "SSL",
                 "ssl.ca.location": str(ca or self.dir / "ca.crt")}
        if who is not None:
            stem = "alice" if who is self.alice else "stranger"
            props["ssl.certificate.location"] = str(self.dir / f"{stem}.crt")
            props["ssl.key.location"] = str(self.dir / f"{stem}.key")
        return props


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = certs.make_ca()
    other = certs.make_ca("someone else's CA")
    p = Pki(d, ca, certs.broker_cert(ca), certs.client_cert(ca, "alice"),
            certs.client_cert(other, "alice"))
    (d / "ca.crt").write_bytes(ca.cert_pem())
    (d / "other-ca.crt").write_bytes(other.cert_pem())
    p.broker.write_pem(d, "broker", key_password="kp")
    p.alice.write_pem(d, "alice")
    p.stranger.write_pem(d, "stranger")
    (d / "broker.p12").write_bytes(p.broker.pkcs12("ksp"))
    return p


def broker_props(pki: Pki, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.dir / "broker.pem"),
            "ssl.key.password": "kp", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.dir / "ca.crt"), **extra}


@dataclass
class Served:
    port: int
    principals: list[str]
    errors: list[str]


Serve = Callable[["ServerTls"], "Served"]


@pytest.fixture
def serve() -> Iterator[Callable[[ServerTls], Served]]:
    """Start a TLS listener on loopback for a ServerTls; it answers each handshake with
    the principal it derived. Stopped whatever happens."""
    stops: list[tuple[socket.socket, threading.Thread]] = []

    def start(tls: ServerTls) -> Served:
        sock = socket.create_server(("127.0.0.1", 0))
        served = Served(sock.getsockname()[1], [], [])

        def loop() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                conn.settimeout(10)
                try:
                    with tls.context.wrap_socket(conn, server_side=True) as s:
                        name = str(tls.principal(s))
                        served.principals.append(name)
                        s.sendall(name.encode() + b"\n")
                except (OSError, ssl.SSLError) as e:
                    served.errors.append(str(e))
                    conn.close()

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        stops.append((sock, t))
        return served

    try:
        yield start
    finally:
        for sock, t in stops:
            # shutdown wakes a thread blocked in accept(); close alone does not
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            t.join(5)


def handshake(port: int, props: dict[str, str], host: str = "localhost") -> tuple[str, str]:
    """Connect with our client context: (principal the broker saw, broker cert's CN)."""
    ctx = client_context(props)
    assert ctx is not None
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=host) as s:
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(256)
            if not chunk:
                break
            data += chunk
        cert = s.getpeercert()
        cn = dict(x[0] for x in cert["subject"])["commonName"]
        return data.decode().strip(), cn


def test_client_certificate_names_the_principal_as_kafka(pki: Pki, serve: Serve) -> None:
    served = serve(ServerTls.from_config(broker_props(pki, **{"ssl.client.auth": "required"})))
    principal, cn = handshake(served.port, pki.client(pki.alice))
    assert principal == "User:CN=alice,OU=clients,O=odradek" and cn == "localhost"
    mapped = serve(ServerTls.from_config(broker_props(pki, **{
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules":
            "RULE:^CN=(.*?),OU=clients.*$/$1/L,DEFAULT"}), "SSL"))
    assert handshake(mapped.port, pki.client(pki.alice))[0] == "User:alice"


def test_missing_or_untrusted_client_certificates_are_refused(pki: Pki, serve: Serve) -> None:
    served = serve(ServerTls.from_config(broker_props(pki, **{"ssl.client.auth": "required"})))
    for props in (pki.client(None), pki.client(pki.stranger)):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            handshake(served.port, props)
    assert served.principals == []
    # requested: a client without a certificate is ANONYMOUS
    requested = serve(ServerTls.from_config(broker_props(pki, **{"ssl.client.auth": "requested"})))
    assert handshake(requested.port, pki.client(None))[0] == "User:ANONYMOUS"


def test_clients_refuse_a_broker_from_an_untrusted_ca_or_wrong_host(pki: Pki, serve: Serve) -> None:
    served = serve(ServerTls.from_config(broker_props(pki)))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(served.port, pki.client(None, ca=pki.dir / "other-ca.crt"))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(served.port, pki.client(None), host="broker.example.com")
    no_check = {**pki.client(None), "ssl.endpoint.identification.algorithm": ""}
    assert handshake(served.port, no_check, host="broker.example.com")[0] == "User:ANONYMOUS"


def test_pkcs12_and_inline_pem_keystores(pki: Pki, serve: Serve) -> None:
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.dir / "broker.p12"),
           "ssl.keystore.password": "ksp"}
    assert handshake(serve(ServerTls.from_config(p12)).port, pki.client(None))[1] == "localhost"
    inline = {"ssl.keystore.type": "PEM",
              "ssl.keystore.certificate.chain": pki.broker.cert_pem().decode(),
              "ssl.keystore.key": pki.broker.key_pem("kp").decode(), "ssl.key.password": "kp",
              "ssl.truststore.type": "PEM",
              "ssl.truststore.certificates": pki.ca.cert_pem().decode(),
              "ssl.client.auth": "required"}
    served = serve(ServerTls.from_config(inline))
    assert handshake(served.port, pki.client(pki.alice))[0].startswith("User:CN=alice")


def test_certificates_reload_without_restart(pki: Pki, serve: Serve,
                                                tmp_path: Path) -> None:
    shutil.copy(pki.dir / "broker.pem", tmp_path / "ks.pem")
    props = broker_props(pki, **{"ssl.keystore.location": str(tmp_path / "ks.pem")})
    tls = ServerTls.from_config(props)
    served = serve(tls)
    assert handshake(served.port, pki.client(None))[1] == "localhost"
    assert not tls.reload_if_changed()
    renewed = certs.issue(pki.ca, "renewed", hosts=["localhost"])
    renewed.write_pem(tmp_path, "ks", key_password="kp")
    assert tls.files_changed() and tls.reload_if_changed()
    assert handshake(served.port, pki.client(None))[1] == "renewed"
    (tmp_path / "ks.pem").write_text("garbage")
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        tls.reload_if_changed()
    assert handshake(served.port, pki.client(None))[1] == "renewed"  # old material kept


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_openssl_s_client_with_a_client_certificate(pki: Pki, serve: Serve) -> None:
    served = serve(ServerTls.from_config(broker_props(pki, **{"ssl.client.auth": "required"})))
    out = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{served.port}", "-servername",
         "localhost", "-CAfile", str(pki.dir / "ca.crt"), "-verify_return_error",
         "-cert", str(pki.dir / "alice.crt"), "-key", str(pki.dir / "alice.key"),
         "-tls1_3"], input=b"", capture_output=True, timeout=30, check=False)
    assert b"Verify return code: 0 (ok)" in out.stdout
    assert "User:CN=alice,OU=clients,O=odradek" in served.principals


@pytest.mark.parametrize(
    ("extra", "prop"),
    [
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        ({"ssl.key.password": "wrong"}, "ssl.key.password"),
        ({"ssl.keystore.location": "/nonexistent/ks.pem"}, "ssl.keystore.location"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
        ({"ssl.principal.mapping.rules": "RULE:broken"}, "ssl.principal.mapping.rules"),
        ({"ssl.endpoint.identification.algorithm": "ldap"},
         "ssl.endpoint.identification.algorithm"),
        ({"ssl.truststore.location": "", "ssl.client.auth": "required"},
         "ssl.truststore.location"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_property(pki: Pki, extra: dict[str, str],
                                                            prop: str) -> None:
    with pytest.raises(ConfigError) as err:
        ServerTls.from_config(broker_props(pki, **extra))
    assert str(err.value).startswith(prop + ":") and "\n" not in str(err.value)
    assert "kp" not in str(err.value).split(":", 1)[1].replace("ks", "")


def test_tls12_only_with_kafka_cipher_names(pki: Pki, serve: Serve) -> None:
    tls = ServerTls.from_config(broker_props(pki, **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}))
    served = serve(tls)
    ctx = client_context(pki.client(None))
    assert ctx is not None
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.version() == "TLSv1.2"
        assert s.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


def test_client_properties_plaintext_and_errors(pki: Pki) -> None:
    assert client_context({"security.protocol": "SASL_PLAINTEXT"}) is None
    assert client_context({}) is None
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        client_context({"security.protocol": "TLS"})
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        client_context({"security.protocol": "SSL", "ssl.ca.location": "/nope"})
    java = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.dir / "ca.crt")}
    assert client_context(java) is not None


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_librdkafka_handshakes_with_a_client_certificate(pki: Pki, serve: Serve) -> None:
    """confluent-kafka (librdkafka's own OpenSSL use) against our listener context and
    the certificates certs.py makes: the broker side sees alice's certificate."""
    from confluent_kafka import Producer

    served = serve(ServerTls.from_config(broker_props(pki, **{"ssl.client.auth": "required"})))
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": f"localhost:{served.port}", **pki.client(pki.alice),
                         "error_cb": lambda e: errors.append(str(e)), "log_level": 0})
    try:
        assert wait_for(lambda: bool(served.principals)), (served.errors, errors)
        assert served.principals[0] == "User:CN=alice,OU=clients,O=odradek"
    finally:
        producer.flush(0)
        del producer
    untrusted = serve(ServerTls.from_config(broker_props(pki)))
    refused: list[str] = []
    producer = Producer({"bootstrap.servers": f"localhost:{untrusted.port}",
                         **pki.client(None, ca=pki.dir / "other-ca.crt"),
                         "error_cb": lambda e: refused.append(str(e)), "log_level": 0})
    try:
        assert wait_for(lambda: bool(untrusted.errors) or bool(refused))
        producer.poll(0.5)
        assert untrusted.principals == []
    finally:
        producer.flush(0)
        del producer


def test_a_written_bundle_serves_tls_to_its_users(tmp_path: Path, serve: Serve) -> None:
    bundle = certs.write_bundle(tmp_path / "secure", brokers=["b1"], users=["admin"])
    assert (tmp_path / "secure" / "user-admin.key").stat().st_mode & 0o777 == 0o600
    tls = ServerTls.from_config(bundle.broker_properties("b1", listener="SSL"), "SSL")
    served = serve(tls)
    principal, cn = handshake(served.port, bundle.client_properties("admin"))
    assert principal == "User:CN=admin,OU=clients,O=odradek" and cn == "b1"


def test_a_truststore_change_admits_a_new_ca_without_restart(pki: Pki, serve: Serve,
                                                             tmp_path: Path) -> None:
    trust = tmp_path / "trust.crt"
    trust.write_bytes(pki.ca.cert_pem())
    tls = ServerTls.from_config(broker_props(pki, **{"ssl.truststore.location": str(trust),
                                                     "ssl.client.auth": "required"}))
    served = serve(tls)
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(served.port, pki.client(pki.stranger))
    other_ca = (pki.dir / "other-ca.crt").read_bytes()
    trust.write_bytes(pki.ca.cert_pem() + other_ca)
    assert tls.reload_if_changed()
    assert handshake(served.port, pki.client(pki.stranger))[0].startswith("User:CN=alice")
