"""The API → permission table covers every API the broker serves, as Kafka checks."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.operations import OPERATIONS, Scope, api_name, cluster_checks, markdown_table
from odradek.server.handlers import HANDLERS

SECURITY_APIS = {17, 29, 30, 31, 36, 48, 49, 50, 51}


def test_every_served_api_and_the_security_apis_have_a_row() -> None:
    missing = (set(HANDLERS) | SECURITY_APIS) - set(OPERATIONS)
    assert not missing, f"no authorization row for API keys {sorted(missing)}"


def test_rows_say_what_kafkas_handlers_check() -> None:
    produce = OPERATIONS[0].checks
    assert [(p.operation, p.resource_type) for c in produce for p in c.any_of] == [
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
        (AclOperation.WRITE, ResourceType.TOPIC)]
    assert produce[1].scope is Scope.ITEM
    assert produce[1].error is ErrorCode.topic_authorization_failed
    [create_check, *_] = OPERATIONS[3].checks[1:]
    assert [str(p) for p in create_check.any_of] == ["Create on Cluster", "Create on Topic"]
    assert [c.error for c in OPERATIONS[10].checks] == [
        ErrorCode.group_authorization_failed, ErrorCode.transactional_id_authorization_failed]
    assert api_name(22) == "InitProducerId" and api_name(999) == "ApiKey999"


def test_pipeline_cluster_checks_are_the_unconditional_cluster_ones() -> None:
    assert [str(c) for c in cluster_checks(30)] == ["Alter on Cluster"]
    assert [str(c) for c in cluster_checks(27)] == ["Alter on Cluster or ClusterAction on Cluster"]
    assert cluster_checks(0) == () and cluster_checks(22) == ()  # conditional or per item


def test_docs_table_lists_every_api() -> None:
    table = markdown_table()
    for a in OPERATIONS.values():
        assert f"| {a.name} |" in table
    assert "TOPIC_AUTHORIZATION_FAILED" in table


def test_docs_security_md_holds_the_current_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    generated = doc.split("<!-- BEGIN GENERATED TABLE -->\n")[1].split(
        "<!-- END GENERATED TABLE -->")[0]
    assert generated == markdown_table(), "run python -m odradek.security.operations"
