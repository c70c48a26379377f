"""ACLs in a real ZooKeeper, in Kafka's layout: one broker-side reader loads every ACL
znode and follows change notifications, as Kafka's ZooKeeper authorizer does."""

from __future__ import annotations

import threading
from collections.abc import Iterator

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
