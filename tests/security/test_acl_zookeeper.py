"""ACLs in a real ZooKeeper, in Kafka's layout: one broker-side reader loads every ACL
znode and follows change notifications, as Kafka's ZooKeeper authorizer does."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import pytest
from kazoo.client import KazooClient

from odradek.security import acl_zk
from odradek.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer, Action, Decision, RequestContext
from odradek.security.principal import user
from odradek.security.sasl.scram import make_credential
from tests.cluster.inproc import Node, until
from tests.zk import ZooKeeperProcess, zookeeper  # noqa: F401  (fixture)

T = ResourceType.TOPIC


@pytest.fixture
def zk(zookeeper: ZooKeeperProcess) -> Iterator[KazooClient]:  # noqa: F811
    client = KazooClient(hosts=zookeeper.connect, timeout=10)
    client.start(timeout=15)
    try:
        for root in acl_zk.all_roots():
            client.ensure_path(root)
        yield client
    finally:
        client.delete("/kafka-acl", recursive=True)
        client.delete("/kafka-acl-extended", recursive=True)
        client.stop()
        client.close()


def write(zk: KazooClient, pattern: ResourcePattern, bindings: list[AclBinding]) -> None:
    """What kafka-acls.sh (ZooKeeper mode) does: the resource znode, then a notice."""
    path = acl_zk.resource_path(pattern)
    data = acl_zk.encode_acls(b.entry for b in bindings)
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    prefix, value = acl_zk.change_notification(pattern)
    zk.create(prefix, value, sequence=True)


def load_all(zk: KazooClient, auth: AclAuthorizer) -> None:
    for ptype in (PatternType.LITERAL, PatternType.PREFIXED):
        root = acl_zk.store_root(ptype)
        for type_name in zk.get_children(root):
            for name in zk.get_children(f"{root}/{type_name}"):
                path = f"{root}/{type_name}/{name}"
                pattern = acl_zk.pattern_from_path(path)
                auth.replace_resource(pattern, acl_zk.decode_acls(zk.get(path)[0]))


def test_acls_round_trip_through_zookeeper_and_changes_are_followed(zk: KazooClient) -> None:
    alice = RequestContext(user("alice"), "10.0.0.1", "Produce")
    orders = ResourcePattern(T, "orders")
    logs = ResourcePattern(T, "logs-", PatternType.PREFIXED)
    write(zk, orders, [AclBinding(orders, AclBinding.of(T, "orders", "User:alice",
                                                         AclOperation.WRITE).entry)])
    write(zk, logs, [AclBinding.of(T, "logs-", "User:*", AclOperation.READ,
                                   pattern_type=PatternType.PREFIXED)])
    assert zk.exists("/kafka-acl/Topic/orders") and zk.exists(
        "/kafka-acl-extended/prefixed/Topic/logs-")

    auth = AclAuthorizer()
    load_all(zk, auth)
    assert auth.authorize_one(alice, Action(AclOperation.WRITE, T, "orders")) is Decision.ALLOWED
    assert auth.authorize_one(alice, Action(AclOperation.READ, T, "logs-a")) is Decision.ALLOWED

    seen: set[str] = set(zk.get_children(acl_zk.LITERAL_CHANGES))
    changed = threading.Event()

    def on_change(children: list[str]) -> None:
        for child in sorted(set(children) - seen):
            seen.add(child)
            data, _ = zk.get(f"{acl_zk.LITERAL_CHANGES}/{child}")
            pattern = acl_zk.decode_change(acl_zk.LITERAL_CHANGES, data)
            znode = zk.exists(acl_zk.resource_path(pattern))
            entries = acl_zk.decode_acls(zk.get(acl_zk.resource_path(pattern))[0]) if znode else []
            auth.replace_resource(pattern, entries)
            changed.set()

    zk.ChildrenWatch(acl_zk.LITERAL_CHANGES, on_change)
    write(zk, orders, [AclBinding.of(T, "orders", "User:alice", AclOperation.WRITE,
                                     AclPermissionType.DENY)])
    assert changed.wait(10)
    assert auth.authorize_one(alice, Action(AclOperation.WRITE, T, "orders")) is Decision.DENIED


# ---- brokers' metadata stores on ZooKeeper: CreateAcls/DeleteAcls and SCRAM land in
# Kafka's znodes and reach every broker through the change notifications ----------------

def _three_nodes(zookeeper: ZooKeeperProcess,  # noqa: F811
                 scenario: Callable[[list[Node], KazooClient], Awaitable[None]]) -> None:
    chroot = f"/t{uuid.uuid4().hex[:8]}"
    connect = f"{zookeeper.connect}{chroot}"

    async def main() -> None:
        zk = KazooClient(hosts=connect, timeout=10)
        root = KazooClient(hosts=zookeeper.connect, timeout=10)
        root.start(10)
        root.ensure_path(chroot)
        root.stop()
        zk.start(10)
        nodes: list[Node] = []
        try:
            for i in range(3):
                nodes.append(await Node(connect, i + 1).start())
            await scenario(nodes, zk)
        finally:
            for n in nodes:
                n.stop()
            zk.stop()
            zk.close()

    asyncio.run(main())


ALICE_WRITE = ("TOPIC", "orders", "LITERAL", "User:alice", "*", "WRITE", "ALLOW")
ANYONE_READ_LOGS = ("TOPIC", "logs-", "PREFIXED", "User:*", "*", "READ", "ALLOW")
BOB_GROUP = ("GROUP", "g1", "LITERAL", "User:bob", "10.0.0.1", "READ", "DENY")


def test_acls_written_through_one_broker_reach_every_broker_in_kafkas_znodes(
        zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    async def scenario(nodes: list[Node], zk: KazooClient) -> None:
        await nodes[0].store.set_acls([ALICE_WRITE, ANYONE_READ_LOGS])
        assert set(nodes[0].image.acls) == {ALICE_WRITE, ANYONE_READ_LOGS}  # at once
        data, _ = zk.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
             "host": "*"}]}
        assert zk.exists("/kafka-acl-extended/prefixed/Topic/logs-")
        literal = zk.get_children("/kafka-acl-changes")
        assert [zk.get(f"/kafka-acl-changes/{c}")[0] for c in literal] == [b"TOPIC:orders"]
        extended = zk.get_children("/kafka-acl-extended-changes")
        assert json.loads(zk.get(f"/kafka-acl-extended-changes/{extended[0]}")[0]) == {
            "version": 1, "resourceType": "TOPIC", "name": "logs-", "patternType": "PREFIXED"}
        started = time.monotonic()
        await until(lambda: all(set(n.image.acls) == {ALICE_WRITE, ANYONE_READ_LOGS}
                                for n in nodes), 5, "every broker to see the ACLs")
        assert time.monotonic() - started < 1.0

        # two brokers add to one resource at once: both land (versioned merge)
        carol = ("TOPIC", "orders", "LITERAL", "User:carol", "*", "READ", "ALLOW")
        await asyncio.gather(nodes[1].store.set_acls([*nodes[1].image.acls, carol]),
                             nodes[2].store.set_acls([*nodes[2].image.acls, BOB_GROUP]))
        want = {ALICE_WRITE, ANYONE_READ_LOGS, carol, BOB_GROUP}
        await until(lambda: all(set(n.image.acls) == want for n in nodes), 5, "both adds")
        assert len(json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"]) == 2

        # kafka-acls.sh in ZooKeeper mode: the znode, then the notification
        zk.set("/kafka-acl/Topic/orders", acl_zk.encode_acls([]))
        zk.create("/kafka-acl-changes/acl_changes_", b"Topic:orders",  # an old tool's form
                  sequence=True)
        await until(lambda: all(set(n.image.acls) == {ANYONE_READ_LOGS, BOB_GROUP}
                                for n in nodes), 5, "an outside tool's change")

        # removing the last ACL of a resource deletes its znode
        await nodes[2].store.set_acls([ANYONE_READ_LOGS])
        assert not zk.exists("/kafka-acl/Group/g1")
        await until(lambda: all(set(n.image.acls) == {ANYONE_READ_LOGS} for n in nodes), 5,
                    "the removal")

        # a broker that starts later reads the whole tree
        late = await Node(nodes[0].connect, 4).start()
        try:
            assert set(late.image.acls) == {ANYONE_READ_LOGS}
        finally:
            late.stop()

    _three_nodes(zookeeper, scenario)


def test_scram_credentials_live_in_config_users_beside_quotas_and_reach_every_broker(
        zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    async def scenario(nodes: list[Node], zk: KazooClient) -> None:
        credential = str(make_credential("SCRAM-SHA-512", "alice-secret", 4096))
        await nodes[0].store.alter_client_quotas([
            ("/config/users/alice", "producer_byte_rate", "1024")])
        await nodes[1].store.alter_user_config("alice", "SCRAM-SHA-512", credential)
        stored = json.loads(zk.get("/config/users/alice")[0])
        assert stored == {"version": 1, "config": {"producer_byte_rate": "1024",
                                                   "SCRAM-SHA-512": credential}}
        assert credential.startswith("salt=") and ",stored_key=" in credential
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0])
                   for c in sorted(zk.get_children("/config/changes"))]
        assert changes[-1] == {"version": 2, "entity_path": "users/alice"}
        await until(lambda: all(n.image.user_configs.get("alice") == {
            "SCRAM-SHA-512": credential} for n in nodes), 5, "the credential everywhere")
        for n in nodes:  # the quota is unchanged, and holds no credential
            assert n.image.client_quotas == {"/config/users/alice":
                                             {"producer_byte_rate": "1024"}}
        await nodes[2].store.alter_user_config("alice", "SCRAM-SHA-512", None)
        await until(lambda: all("alice" not in n.image.user_configs for n in nodes), 5,
                    "the deletion everywhere")
        assert json.loads(zk.get("/config/users/alice")[0])["config"] == {
            "producer_byte_rate": "1024"}

    _three_nodes(zookeeper, scenario)


def test_change_notifications_older_than_the_expiry_are_purged_oldest_first(
        zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    from odradek.cluster import zk_acls
    from odradek.cluster.zk_client import ZkSession

    session = ZkSession(f"{zookeeper.connect}/p{uuid.uuid4().hex[:8]}",
                        session_timeout_ms=10_000, connection_timeout_ms=10_000)
    session.start()
    try:
        root = zk_acls.LITERAL_CHANGES
        old = [session.create(f"{root}/acl_changes_", b"Topic:t", sequence=True,
                              makepath=True) for _ in range(2)]
        old_ctime = max(session.exists(p).ctime for p in old)  # type: ignore[union-attr]
        while time.time() * 1000 < old_ctime + 10:  # the clock moves past them
            time.sleep(0.001)
        young = session.create(f"{root}/acl_changes_", b"Topic:t", sequence=True)
        now_ms = session.exists(young).ctime  # type: ignore[union-attr]
        assert zk_acls.purge_expired(session, root, now_ms) == 0  # none is 15 minutes old
        assert zk_acls.purge_expired(session, root, now_ms, expiration_ms=5) == 2
        assert session.children(root) == [young.rsplit("/", 1)[1]]
    finally:
        session.stop()


def test_configs_alter_writes_scram_credentials_into_zookeeper_before_any_broker(
        zookeeper: ZooKeeperProcess) -> None:  # noqa: F811
    """`odradek configs alter --zookeeper`: the offline way to the first admin."""
    from typer.testing import CliRunner

    from odradek.cli.main import app
    from odradek.security.sasl.scram import (
        ScramCredential,
        credential_from_salted,
        salted_password,
    )

    connect = f"{zookeeper.connect}/s{uuid.uuid4().hex[:8]}"
    runner = CliRunner()
    base = ["configs", "alter", "--zookeeper", connect, "--entity-type", "users",
            "--entity-name", "bob"]
    done = runner.invoke(app, [*base, "--add-config",
                               "SCRAM-SHA-256=[iterations=8192,password=pw=d]"])
    assert done.exit_code == 0, done.output
    assert "Completed updating config for user bob." in done.output
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(10)
    try:
        stored = json.loads(zk.get("/config/users/bob")[0])["config"]["SCRAM-SHA-256"]
        credential = ScramCredential.parse(stored)  # salted, never the password
        assert credential.iterations == 8192 and "pw=d" not in stored  # (base64 may hold "pw")
        assert credential == credential_from_salted(
            "SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pw=d", credential.salt, 8192),
            credential.salt, 8192)
        changes = zk.get_children("/config/changes")
        assert len(changes) == 1
        refused = runner.invoke(app, [*base, "--add-config", "SCRAM-SHA-1=[password=x]"])
        assert refused.exit_code == 1 and "Invalid SCRAM mechanism" in refused.output
        refused = runner.invoke(app, [*base, "--add-config", "SCRAM-SHA-256=[password=a,b]"])
        assert refused.exit_code == 1 and "cannot hold a comma" in refused.output
        done = runner.invoke(app, [*base, "--delete-config", "SCRAM-SHA-256"])
        assert done.exit_code == 0, done.output
        assert json.loads(zk.get("/config/users/bob")[0])["config"] == {}
    finally:
        zk.stop()
        zk.close()
