"""ACLs on subjects: confluent-kafka's SchemaRegistryClient as alice, bob and a super user
against a registry started with --enable-authorization, the ACLs added and removed with
`odradek schemas acl` (which writes them to the `<topic>_acl` topic)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import typer
from click.testing import Result
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from typer.testing import CliRunner

from odradek.cli import schemas
from odradek.registry.acls import REGISTRY, SUBJECT, AclState, RegistryAcl, RegistryAuthorizer
from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess

PASSWORDS = {"alice": "a-secret", "bob": "b-secret", "admin": "root"}


def avro(*fields: str) -> Schema:
    listed = ", ".join(f'{{"name": "{f}", "type": "string", "default": ""}}' for f in fields)
    return Schema(f'{{"type": "record", "name": "Order", "fields": [{listed}]}}', "AVRO")


class Secured:
    def __init__(self, registry: RegistryProcess) -> None:
        self.registry = registry

    def client(self, user: str) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.registry.url,
                                     "basic.auth.user.info": f"{user}:{PASSWORDS[user]}"})

    def status(self, user: str, method: str, path: str, body: object = None) -> int:
        return httpx.request(method, f"{self.registry.url}{path}", json=body, timeout=35,
                             auth=(user, PASSWORDS[user])).status_code

    def acl(self, *args: str) -> Result:
        """`odradek schemas acl ...`, in this process (the CLI's parsing and Kafka I/O
        as run, without a second interpreter's start-up per call)."""
        return CliRunner().invoke(schemas.app, ["acl", *args, "-b", self.registry.bootstrap,
                                                "--topic", self.registry.topic])

    def wait_until(self, done: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout}s: {what}\n{self.registry.logs()}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def secured(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("acl-registry")
    users = tmp / "password.properties"
    users.write_text("".join(f"{u}: {p}\n" for u, p in PASSWORDS.items()))
    tag = uuid.uuid4().hex[:8]
    r = RegistryProcess(broker.bootstrap, tmp, topic=f"_schemas-{tag}", group_id=f"sr-{tag}",
                        extra=["--basic-auth-file", str(users), "--enable-authorization",
                               "--super-users", "User:admin"])
    try:
        r.start()
        s = Secured(r)
        # a write as the super user succeeds once the group has a leader
        s.wait_until(lambda: s.status("admin", "PUT", "/config",
                                      {"compatibility": "BACKWARD"}) == 200, "a leader")
        yield s
    finally:
        r.stop()


def test_subject_acls_decide_who_registers_and_who_sees_what(secured: Secured) -> None:
    for args in (["--principal", "User:alice", "-o", "write", "-o", "read",
                  "--subject", "orders-value"],
                 ["--principal", "User:bob", "-o", "write", "--prefixed",
                  "--subject", "payments-"]):
        added = secured.acl("add", *args)
        assert added.exit_code == 0, added.output
    # allowed reaches the handler (404: no such subject yet), denied stops at 403
    secured.wait_until(lambda: secured.status("alice", "GET", "/subjects/orders-value/versions")
                       == 404, "alice's ACL applied")
    # an invalid schema: 422 once bob may write (and nothing is written either way)
    secured.wait_until(lambda: secured.status("bob", "POST", "/subjects/payments-value/versions",
                                              {"schema": "{not json"}) == 422,
                       "bob's ACL applied")

    alice, bob, admin = (secured.client(u) for u in ("alice", "bob", "admin"))
    order_id = alice.register_schema("orders-value", avro("id"))

    with pytest.raises(SchemaRegistryError) as denied:
        bob.register_schema("orders-value", avro("id", "note"))
    assert denied.value.http_status_code == 403
    assert denied.value.error_code == 40301
    assert denied.value.error_message == \
        "User bob is denied operation Write on Subject: orders-value"
    assert admin.get_versions("orders-value") == [1]  # bob's schema was not written

    bob.register_schema("payments-value", avro("amount"))
    assert alice.get_subjects() == ["orders-value"]
    assert bob.get_subjects() == ["payments-value"]
    assert admin.get_subjects() == ["orders-value", "payments-value"]

    # an id resolves for whoever may read a subject it is registered under
    assert "id" in alice.get_schema(order_id).schema_str
    with pytest.raises(SchemaRegistryError) as by_id:
        secured.client("bob").get_schema(order_id)
    assert by_id.value.http_status_code == 403 and by_id.value.error_code == 40301
    # the global config is the registry's: only the super user (or an ACL on it)
    assert secured.status("alice", "PUT", "/config", {"compatibility": "NONE"}) == 403
    assert secured.status("alice", "GET", "/config/orders-value") == 403
    assert secured.status("bob", "DELETE", "/subjects/payments-value") == 403

    listed = secured.acl("list")
    assert listed.exit_code == 0, listed.output
    assert "User:alice" in listed.output and "payments-" in listed.output

    removed = secured.acl("remove", "--principal", "User:alice", "-o", "write",
                          "--subject", "orders-value")
    assert removed.exit_code == 0, removed.output
    secured.wait_until(lambda: secured.status("alice", "POST", "/subjects/orders-value/versions",
                                              {"schema": '"string"'}) == 403,
                       "alice's WRITE removed")
    assert admin.get_versions("orders-value") == [1]
    assert alice.get_subjects() == ["orders-value"]  # READ stays


def test_bad_acl_arguments_fail_in_one_line(secured: Secured) -> None:
    bad = secured.acl("add", "--principal", "alice", "-o", "read", "--subject", "x")
    assert bad.exit_code == 1 and "User:alice" in bad.output
    bad = secured.acl("add", "--principal", "User:alice", "-o", "fly", "--subject", "x")
    assert bad.exit_code == 1 and "unknown operation" in bad.output
    bad = secured.acl("add", "--principal", "User:alice", "-o", "read")
    assert bad.exit_code == 1 and "--registry-global" in bad.output


def test_authorization_without_basic_auth_is_refused() -> None:
    app = typer.Typer()  # the command alone: odradek.cli.main imports every command
    app.command()(schemas.schema_registry)
    done = CliRunner().invoke(app, ["--enable-authorization"])
    assert done.exit_code == 1 and "--basic-auth-file" in done.output


def test_deny_wins_and_implied_operations() -> None:
    state = AclState()
    for n, acl in enumerate([RegistryAcl("User:*", SUBJECT, "*", "READ"),
                             RegistryAcl("User:bob", SUBJECT, "secret-", "READ", "DENY",
                                         "PREFIXED"),
                             RegistryAcl("User:carol", REGISTRY, "", "ALTER_CONFIGS")]):
        state.apply(json_key(acl), True, n)
    authz = RegistryAuthorizer(state, frozenset({"User:root"}))
    assert authz.allowed("alice", "READ", SUBJECT, "secret-value")
    assert authz.allowed("bob", "READ", SUBJECT, "orders-value")
    assert not authz.allowed("bob", "READ", SUBJECT, "secret-value")
    assert authz.allowed("bob", "DESCRIBE", SUBJECT, "nothing")  # READ implies DESCRIBE
    assert not authz.allowed("alice", "WRITE", SUBJECT, "orders-value")
    assert authz.allowed("carol", "DESCRIBE_CONFIGS", REGISTRY, "")
    assert not authz.allowed("carol", "READ", REGISTRY, "")
    assert authz.allowed("root", "DELETE", SUBJECT, "secret-value")
    state.apply(json_key(RegistryAcl("User:*", SUBJECT, "*", "READ")), False, 3)
    assert not authz.allowed("alice", "READ", SUBJECT, "secret-value")


def json_key(acl: RegistryAcl) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(acl.key())
    return loaded


@pytest.mark.slow
def test_a_second_instance_applies_the_same_acls(secured: Secured, tmp_path: Path) -> None:
    """ACLs reach every instance from the topic; a follower denies before forwarding."""
    users = tmp_path / "password.properties"
    users.write_text("".join(f"{u}: {p}\n" for u, p in PASSWORDS.items()))
    first = secured.registry
    second = RegistryProcess(first.bootstrap, tmp_path, topic=first.topic,
                             group_id=first.group_id,
                             extra=["--basic-auth-file", str(users), "--enable-authorization",
                                    "--super-users", "User:admin", "--no-leader-eligibility"])
    try:
        follower = Secured(second.start())
        added = secured.acl("add", "--principal", "User:alice", "-o", "write",
                            "--subject", "shared-value")
        assert added.exit_code == 0, added.output
        follower.wait_until(lambda: follower.status(
            "alice", "POST", "/subjects/shared-value/versions", {"schema": "{bad"}) == 422,
            "the ACL on the second instance")
        # forwarded to the leader with alice's credentials, allowed there too
        follower.client("alice").register_schema("shared-value", avro("id"))
        with pytest.raises(SchemaRegistryError) as denied:
            follower.client("bob").register_schema("shared-value", avro("id", "x"))
        assert denied.value.error_code == 40301
        assert secured.client("admin").get_versions("shared-value") == [1]
    finally:
        second.stop()
