"""`odradek cluster up --secure`: what a secured local cluster needs, made here.

A local CA and a broker certificate (the `cryptography` package, odradek.security.certs)
under <data-dir>/tls; brokers with only SASL_SSL listeners (SCRAM-SHA-512), replicating
over them as User:admin, with the ACL authorizer and `super.users=User:admin`; the admin's
SCRAM credential written into ZooKeeper before any broker starts (as kafka-configs.sh
--zookeeper does); and a client.properties in the Java client's names (every odradek
and Kafka tool takes it with --command-config), printed with the equivalent
librdkafka settings.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from odradek.cli import scram_users
from odradek.security.certs import write_bundle

MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"


@dataclass(frozen=True)
class SecureSetup:
    broker_properties: dict[str, str]
    client_properties: Path
    librdkafka: dict[str, str]


def prepare(data_dir: Path, zookeeper: str) -> SecureSetup:
    """Certificates, the admin's credential in ZooKeeper, the client's properties. A
    new admin password each time (it is in client.properties, mode 0600)."""
    bundle = write_bundle(data_dir / "tls", brokers=["localhost"], users=[])
    password = secrets.token_urlsafe(18)
    scram_users.alter_offline(zookeeper, ADMIN, {MECHANISM: (8192, password)}, [])
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{ADMIN}" password="{password}";')
    tls = {f"listener.name.sasl_ssl.{k}": v
           for k, v in bundle.broker_properties("localhost").items() if k != "ssl.client.auth"}
    brokers = {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN}",
        **tls,
    }
    client = data_dir / "client.properties"
    lines = ["security.protocol=SASL_SSL", f"sasl.mechanism={MECHANISM}",
             f"sasl.jaas.config={jaas}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={bundle.ca_path}"]
    client.touch(mode=0o600)
    client.chmod(0o600)
    client.write_text("\n".join(lines) + "\n")
    librdkafka = {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
                  "sasl.username": ADMIN, "sasl.password": password,
                  "ssl.ca.location": str(bundle.ca_path)}
    return SecureSetup(brokers, client, librdkafka)


def listener(port: int) -> str:
    return f"SASL_SSL://127.0.0.1:{port}"
