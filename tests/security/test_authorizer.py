"""The ACL authorizer's decisions, filters, validation, log lines and ZooKeeper codec."""

from __future__ import annotations

import json
import logging
import time

import pytest

from odradek.configdef import ConfigError
from odradek.security import acl_zk
from odradek.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer, Action, Decision, RequestContext
from odradek.security.principal import user

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op, Perm = AclOperation, AclPermissionType
ALICE = RequestContext(user("alice"), "10.0.0.1", "Fetch")
BOB = RequestContext(user("bob"), "10.0.0.2", "Produce")


def can(auth: AclAuthorizer, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
        name: str) -> bool:
    return auth.authorize_one(ctx, Action(op, rtype, name)) is Decision.ALLOWED


def test_no_acl_denies_unless_allow_everyone_and_one_acl_closes_the_resource() -> None:
    strict = AclAuthorizer()
    assert not can(strict, ALICE, Op.READ, T, "orders")
    open_ = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert can(open_, ALICE, Op.READ, T, "orders")
    open_.add(AclBinding.of(T, "orders", "User:bob", Op.READ))
    assert not can(open_, ALICE, Op.READ, T, "orders")  # the resource now has ACLs
    assert can(open_, BOB, Op.READ, T, "orders")
    assert can(open_, ALICE, Op.READ, T, "other")


def test_deny_wins_over_allow_from_any_pattern() -> None:
    auth = AclAuthorizer()
    auth.add(AclBinding.of(T, "*", "User:*", Op.ALL))
    auth.add(AclBinding.of(T, "secret-", "User:alice", Op.READ, Perm.DENY,
                           pattern_type=PatternType.PREFIXED))
    assert can(auth, ALICE, Op.READ, T, "public")
    assert not can(auth, ALICE, Op.READ, T, "secret-pay")
    assert can(auth, ALICE, Op.WRITE, T, "secret-pay")  # deny READ denies only READ
    assert can(auth, BOB, Op.READ, T, "secret-pay")


def test_allow_implies_describe_and_describe_configs_but_deny_does_not() -> None:
    auth = AclAuthorizer()
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        auth.add(AclBinding.of(T, f"t-{op.name}", "User:alice", op))
        assert can(auth, ALICE, Op.DESCRIBE, T, f"t-{op.name}")
    auth.add(AclBinding.of(T, "c", "User:alice", Op.ALTER_CONFIGS))
    assert can(auth, ALICE, Op.DESCRIBE_CONFIGS, T, "c")
    assert not can(auth, ALICE, Op.DESCRIBE, T, "c")
    auth.add(AclBinding.of(T, "d", "User:alice", Op.ALL))
    auth.add(AclBinding.of(T, "d", "User:alice", Op.READ, Perm.DENY))
    assert can(auth, ALICE, Op.DESCRIBE, T, "d")
    assert not can(auth, ALICE, Op.READ, T, "d")


def test_hosts_literal_and_prefixed_names_and_super_users() -> None:
    auth = AclAuthorizer.from_config({"super.users": "User:admin;User:CN=broker,O=x"})
    auth.add(AclBinding.of(T, "logs-", "User:alice", Op.READ, host="10.0.0.1",
                           pattern_type=PatternType.PREFIXED))
    auth.add(AclBinding.of(G, "g1", "User:alice", Op.READ))
    assert can(auth, ALICE, Op.READ, T, "logs-app")
    assert can(auth, ALICE, Op.READ, T, "logs-")
    assert not can(auth, ALICE, Op.READ, T, "logs")
    assert not can(auth, RequestContext(user("alice"), "10.0.0.9"), Op.READ, T, "logs-app")
    assert can(auth, ALICE, Op.READ, G, "g1")
    assert not can(auth, ALICE, Op.READ, G, "g10")  # literal is not a prefix
    assert not can(auth, ALICE, Op.READ, T, "g1")  # nor another resource type
    admin = RequestContext(user("admin"), "1.2.3.4")
    assert can(auth, admin, Op.ALTER, C, "kafka-cluster")
    assert can(auth, RequestContext(user("CN=broker,O=x"), "h"), Op.CLUSTER_ACTION, C,
               "kafka-cluster")
    with pytest.raises(ConfigError, match=r"super\.users"):
        AclAuthorizer.from_config({"super.users": "admin"})
    with pytest.raises(ConfigError, match=r"allow\.everyone"):
        AclAuthorizer.from_config({"allow.everyone.if.no.acl.found": "yes"})


def test_filters_match_as_kafka_including_match_pattern_type() -> None:
    auth = AclAuthorizer()
    lit = AclBinding.of(T, "foo", "User:alice", Op.READ)
    wild = AclBinding.of(T, "*", "User:bob", Op.WRITE)
    pre = AclBinding.of(T, "fo", "User:alice", Op.WRITE, pattern_type=PatternType.PREFIXED)
    grp = AclBinding.of(G, "foo", "User:alice", Op.READ)
    for b in (lit, wild, pre, grp):
        auth.add(b)
    assert len(auth) == 4

    def found(f: AclBindingFilter) -> set[AclBinding]:
        return set(auth.acls(f))

    assert found(AclBindingFilter()) == {lit, wild, pre, grp}
    assert found(AclBindingFilter(ResourcePatternFilter(T, "foo", PatternType.MATCH))) == {
        lit, wild, pre}
    assert found(AclBindingFilter(ResourcePatternFilter(T, "foo", PatternType.ANY))) == {lit}
    assert found(AclBindingFilter(ResourcePatternFilter(T, "fo", PatternType.PREFIXED))) == {pre}
    assert found(AclBindingFilter(entry=AccessControlEntryFilter(
        principal="User:alice", operation=Op.READ))) == {lit, grp}
    deleted = auth.delete_acls([AclBindingFilter(ResourcePatternFilter(T))])
    assert set(deleted[0]) == {lit, wild, pre}
    assert found(AclBindingFilter()) == {grp}
    with pytest.raises(InvalidAcl, match="Unknown patternFilter"):
        auth.acls(AclBindingFilter(ResourcePatternFilter(pattern_type=PatternType.UNKNOWN)))


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (AclBinding.of(ResourceType.ANY, "x", "User:a", Op.READ), "Invalid resourceType ANY"),
        (AclBinding.of(C, "other", "User:a", Op.ALTER), "only valid name for the CLUSTER"),
        (AclBinding.of(T, "", "User:a", Op.READ), "Invalid empty resource name"),
        (AclBinding.of(T, "x", "User:a", Op.READ, pattern_type=PatternType.MATCH),
         "Invalid patternType MATCH"),
        (AclBinding.of(T, "x", "User:a", Op.ANY), "Invalid operation ANY"),
        (AclBinding.of(T, "x", "User:a", Op.READ, Perm.ANY), "Invalid permissionType ANY"),
        (AclBinding.of(T, "x", "alice", Op.READ), "principalType:principalName"),
    ],
)
def test_acls_kafka_refuses_are_refused_with_its_message(binding: AclBinding,
                                                         message: str) -> None:
    auth = AclAuthorizer()
    [err] = auth.create_acls([binding])
    assert err is not None and message in err.message
    assert err.code.name == "invalid_request"
    assert len(auth) == 0


def test_log_lines_are_kafkas_denials_info_allows_debug(caplog: pytest.LogCaptureFixture) -> None:
    auth = AclAuthorizer()
    auth.add(AclBinding.of(T, "t", "User:alice", Op.READ))
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        can(auth, ALICE, Op.READ, T, "t")
        can(auth, BOB, Op.WRITE, T, "t")
    allow, deny = caplog.records
    assert allow.levelno == logging.DEBUG and deny.levelno == logging.INFO
    assert allow.getMessage() == (
        "Principal = User:alice is Allowed operation = READ from host = 10.0.0.1 on resource "
        "= Topic:LITERAL:t for request = Fetch with resourceRefCount = 1 based on rule "
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=t, patternType=LITERAL, "
        "principal=User:alice, host=*, operation=READ, permissionType=ALLOW))")
    assert deny.getMessage() == (
        "Principal = User:bob is Denied operation = WRITE from host = 10.0.0.2 on resource = "
        "Topic:LITERAL:t for request = Produce with resourceRefCount = 1 based on rule "
        "DefaultDeny")


def test_authorize_by_resource_type_for_idempotent_producers() -> None:
    auth = AclAuthorizer()
    assert auth.authorize_by_resource_type(ALICE, Op.WRITE, T) is Decision.DENIED
    auth.add(AclBinding.of(T, "a-", "User:alice", Op.WRITE, pattern_type=PatternType.PREFIXED))
    assert auth.authorize_by_resource_type(ALICE, Op.WRITE, T) is Decision.ALLOWED
    auth.add(AclBinding.of(T, "a", "User:alice", Op.WRITE, Perm.DENY,
                           pattern_type=PatternType.PREFIXED))
    assert auth.authorize_by_resource_type(ALICE, Op.WRITE, T) is Decision.DENIED


def test_ten_thousand_acls_do_not_slow_a_check() -> None:
    auth = AclAuthorizer()
    auth.add(AclBinding.of(T, "hot", "User:alice", Op.WRITE))
    t0 = time.perf_counter()
    for _ in range(2000):
        can(auth, ALICE, Op.WRITE, T, "hot")
    small = time.perf_counter() - t0
    for i in range(10_000):
        auth.add(AclBinding.of(T, f"topic-{i}", f"User:u{i}", Op.READ,
                               pattern_type=PatternType.PREFIXED if i % 2 else PatternType.LITERAL))
    t0 = time.perf_counter()
    for _ in range(2000):
        can(auth, ALICE, Op.WRITE, T, "hot")
    big = time.perf_counter() - t0
    # O(matching ACLs): the 10,000 others cost at most a few prefix-length probes
    assert big < small * 3 + 0.05, (small, big)


def test_acl_znodes_round_trip_in_kafkas_layout() -> None:
    entries = [AclBinding.of(T, "orders", "User:alice", Op.IDEMPOTENT_WRITE).entry,
               AclBinding.of(T, "orders", "User:*", Op.READ, Perm.DENY, host="10.0.0.1").entry]
    pattern = ResourcePattern(T, "orders")
    assert acl_zk.resource_path(pattern) == "/kafka-acl/Topic/orders"
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED)
    assert acl_zk.resource_path(prefixed) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    data = acl_zk.encode_acls(entries)
    js = json.loads(data)
    assert js["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow",
            "operation": "IdempotentWrite", "host": "*"} in js["acls"]
    assert set(acl_zk.decode_acls(data)) == set(entries)
    # what Kafka itself wrote (AclEntry's javadoc example, spacing and key order of Jackson)
    kafka_bytes = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",'
                   b'"operation": "Read","principal": "User:alice"}]}')
    [b] = acl_zk.decode_bindings("/kafka-acl-extended/prefixed/Group/group-1", kafka_bytes)
    assert b == AclBinding.of(G, "group-1", "User:alice", Op.READ, Perm.DENY, host="host1",
                              pattern_type=PatternType.PREFIXED)
    path, value = acl_zk.change_notification(pattern)
    assert (path, value) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    assert acl_zk.decode_change("/kafka-acl-changes", b"Topic:orders") == pattern
    path, value = acl_zk.change_notification(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(value) == {"version": 1, "resourceType": "TRANSACTIONAL_ID",
                                 "name": "tx-", "patternType": "PREFIXED"}
    assert acl_zk.decode_change("/kafka-acl-extended-changes", value) == prefixed
    with pytest.raises(acl_zk.AclZnodeError):
        acl_zk.decode_acls(b'{"version": 2, "acls": []}')
    with pytest.raises(acl_zk.AclZnodeError):
        acl_zk.decode_change("/kafka-acl-changes", b"\xff")


def test_a_change_notification_replaces_one_resources_acls() -> None:
    auth = AclAuthorizer()
    pattern = ResourcePattern(T, "orders")
    auth.add(AclBinding.of(T, "orders", "User:alice", Op.READ))
    auth.add(AclBinding.of(T, "other", "User:alice", Op.READ))
    data = acl_zk.encode_acls([AclBinding.of(T, "orders", "User:bob", Op.WRITE).entry])
    auth.replace_resource(pattern, acl_zk.decode_acls(data))
    assert not can(auth, ALICE, Op.READ, T, "orders") and can(auth, BOB, Op.WRITE, T, "orders")
    assert can(auth, ALICE, Op.READ, T, "other")
    auth.replace_resource(pattern, [])
    assert auth.resource_acls(pattern) == [] and len(auth) == 1


def test_filter_authorized_counts_references_once_per_name(
        caplog: pytest.LogCaptureFixture) -> None:
    auth = AclAuthorizer()
    auth.add(AclBinding.of(T, "a", "User:alice", Op.WRITE))
    auth.add(AclBinding.of(C, "kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE))
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        allowed = auth.filter_authorized(ALICE, Op.WRITE, T, ["a", "b", "b", "a", "b"])
    assert allowed == {"a"}
    assert "on resource = Topic:LITERAL:b for request = Fetch with resourceRefCount = 3" in (
        caplog.text)
    assert auth.authorize_cluster(ALICE, Op.IDEMPOTENT_WRITE)
    assert not auth.authorize_cluster(BOB, Op.IDEMPOTENT_WRITE)
