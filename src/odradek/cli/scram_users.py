"""SCRAM credentials of users from the command line, as kafka-configs.sh does them:
`--entity-type users --entity-name alice --add-config 'SCRAM-SHA-512=[password=…]'`
(`iterations=…` optional, 4096 by default) and `--delete-config SCRAM-SHA-512`.

Online through AlterUserScramCredentials (confluent-kafka's AdminClient, so a
--command-config with the admin's own login works); or offline with `--zookeeper`,
written straight into `/config/users/<user>` in Kafka's stored form with Kafka's
change notification — the way to create the first admin before any broker runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from odradek.security.sasl.scram import MECHANISMS, MIN_ITERATIONS, make_credential

TIMEOUT_S = 30.0
Upserts = dict[str, tuple[int, str]]  # mechanism -> (iterations, password)


class ScramError(Exception):
    """A refusal, in one line."""


def is_scram(key: str) -> bool:
    return key.upper().startswith("SCRAM-")


def parse_upserts(sets: Mapping[str, str]) -> Upserts:
    """`SCRAM-SHA-512` -> `[iterations=8192,password=…]` (brackets optional)."""
    out: Upserts = {}
    for key, text in sets.items():
        mechanism = key.strip().upper()
        if mechanism not in MECHANISMS:
            raise ScramError(f"Invalid SCRAM mechanism {key}: one of {', '.join(MECHANISMS)}")
        fields: dict[str, str] = {}
        for part in text.strip().removeprefix("[").removesuffix("]").split(","):
            name, sep, value = part.partition("=")
            if not sep or name.strip() not in ("iterations", "password"):
                raise ScramError(f"{key}: expected [password=…] or [iterations=…,password=…] "
                                 "(a password cannot hold a comma)")
            fields[name.strip()] = value
        if "password" not in fields:
            raise ScramError(f"{key}: expected [password=…] or [iterations=…,password=…]")
        try:
            iterations = int(fields.get("iterations", MIN_ITERATIONS))
        except ValueError:
            raise ScramError(f"{key}: iterations must be a number") from None
        out[mechanism] = (iterations, fields["password"])
    return out


def parse_deletes(keys: Sequence[str]) -> list[str]:
    out = []
    for key in keys:
        mechanism = key.strip().upper()
        if mechanism not in MECHANISMS:
            raise ScramError(f"Invalid SCRAM mechanism {key}: one of {', '.join(MECHANISMS)}")
        out.append(mechanism)
    return out


def alter_online(conf: Mapping[str, Any], user: str, upserts: Upserts,
                 deletes: Sequence[str]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alterations: list[Any] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(
            ScramMechanism[m.replace("-", "_")], iterations), password.encode())
        for m, (iterations, password) in upserts.items()]
    alterations += [UserScramCredentialDeletion(user, ScramMechanism[m.replace("-", "_")])
                    for m in deletes]
    client = AdminClient(dict(conf))
    try:
        for future in client.alter_user_scram_credentials(
                alterations, request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
    except Exception as e:  # KafkaException: the broker's error, in its words
        error = e.args[0] if e.args else e
        raise ScramError(f"{getattr(error, 'str', lambda: str(error))()}") from None


def alter_offline(zookeeper: str, user: str, upserts: Upserts, deletes: Sequence[str]) -> None:
    """Into ZooKeeper directly (kafka-configs.sh --zookeeper): salted, never the password."""
    from odradek.cluster import zk_admin
    from odradek.cluster import zk_data as zd
    from odradek.cluster.zk_client import ZkError, ZkSession

    changes: dict[str, str | None] = dict.fromkeys(deletes)
    for mechanism, (iterations, password) in upserts.items():
        try:
            changes[mechanism] = str(make_credential(mechanism, password, iterations))
        except ValueError as e:
            raise ScramError(str(e)) from None
    session = ZkSession(zookeeper, session_timeout_ms=10_000, connection_timeout_ms=10_000)
    try:
        session.start()
        zk_admin.alter_entity_configs(session, f"{zd.CONFIG_USERS}/{user}", changes)
    except ZkError as e:
        raise ScramError(f"cannot write to ZooKeeper at {zookeeper}: {e}") from None
    finally:
        session.stop()
