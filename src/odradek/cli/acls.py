"""`odradek acls`: add, remove and list ACLs with kafka-acls.sh's flags.

    odradek acls --bootstrap-server H:P --command-config admin.properties \\
        --add --allow-principal User:alice --operation Read --topic orders
    odradek acls --bootstrap-server H:P --list --topic orders
    odradek acls --bootstrap-server H:P --remove --allow-principal User:alice \\
        --operation Read --topic orders --force

Prints what kafka-acls.sh prints (`Current ACLs for resource …`). A client of the
brokers through confluent-kafka's AdminClient, so it works against Apache Kafka too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import fail
from odradek.cli.console import read_client_config

_PATTERNS = ("literal", "prefixed", "match", "any")
_ANY: Any = None  # "any" in a filter (confluent-kafka's stubs say str; it takes None)


def _resources(topics: list[str], groups: list[str], txn_ids: list[str], cluster: bool
               ) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in topics]
    out += [(ResourceType.GROUP, g) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids]
    if cluster:
        out.append((ResourceType.BROKER, "kafka-cluster"))
    return out


def _operation(name: str) -> Any:
    from confluent_kafka.admin import AclOperation

    key = name.replace("-", "_").upper()
    key = {"DESCRIBECONFIGS": "DESCRIBE_CONFIGS", "ALTERCONFIGS": "ALTER_CONFIGS",
           "CLUSTERACTION": "CLUSTER_ACTION", "IDEMPOTENTWRITE": "IDEMPOTENT_WRITE"}.get(
        key, key)
    try:
        return AclOperation[key]
    except KeyError:
        fail(f"Unknown operation {name}: one of Read, Write, Create, Delete, Alter, "
             "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All")


def _show(binding: Any) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, "
            f"operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")


def _resource_text(binding: Any) -> str:
    rtype = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
    return (f"ResourcePattern(resourceType={rtype}, name={binding.name}, "
            f"patternType={binding.resource_pattern_type.name})")


def acls(
    bootstrap_server: str = typer.Option(..., "--bootstrap-server"),
    command_config: Path | None = typer.Option(None, "--command-config"),
    add: bool = typer.Option(False, "--add"),
    remove: bool = typer.Option(False, "--remove"),
    list_: bool = typer.Option(False, "--list"),
    allow_principal: list[str] = typer.Option([], "--allow-principal"),
    deny_principal: list[str] = typer.Option([], "--deny-principal"),
    allow_host: list[str] = typer.Option([], "--allow-host"),
    deny_host: list[str] = typer.Option([], "--deny-host"),
    operation: list[str] = typer.Option([], "--operation"),
    topic: list[str] = typer.Option([], "--topic"),
    group: list[str] = typer.Option([], "--group"),
    transactional_id: list[str] = typer.Option([], "--transactional-id"),
    cluster: bool = typer.Option(False, "--cluster"),
    pattern_type: str = typer.Option("literal", "--resource-pattern-type"),
    force: bool = typer.Option(False, "--force", help="Do not ask before removing"),
    list_principal: list[str] = typer.Option([], "--principal",
                                             help="With --list: only these principals' ACLs"),
) -> None:
    """ACLs as kafka-acls.sh manages them."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )

    if sum((add, remove, list_)) != 1:
        fail("Command must include exactly one action: --list, --add, --remove.")
    if pattern_type.lower() not in _PATTERNS:
        fail(f"Invalid resource pattern type: {pattern_type}")
    pattern = ResourcePatternType[pattern_type.upper()]
    if add and pattern in (ResourcePatternType.MATCH, ResourcePatternType.ANY):
        fail(f"A '--resource-pattern-type' value of '{pattern_type}' is not valid when "
             "adding acls.")
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_server}
    if command_config is not None:
        config.update(read_client_config(command_config))
    admin = AdminClient(config)
    resources = _resources(topic, group, transactional_id, cluster)
    if list_principal and not list_:
        fail("The --principal option is only available if --list is set")
    if list_:
        _list(admin, resources, pattern, list_principal)
        return
    if not resources:
        fail("You must specify one of: --topic, --cluster, --group, --transactional-id")
    principals = ([(p, AclPermissionType.ALLOW) for p in allow_principal]
                  + [(p, AclPermissionType.DENY) for p in deny_principal])
    if add and not principals:
        fail("You must specify one of: --allow-principal, --deny-principal when trying to "
             "add ACLs.")
    ops = [_operation(o) for o in operation] or ([] if remove else [AclOperation.ALL])
    if add:
        # as AclCommand: each principal from each of its permission's hosts (default *)
        hosts = {AclPermissionType.ALLOW: allow_host or ["*"],
                 AclPermissionType.DENY: deny_host or ["*"]}
        bindings = [AclBinding(rtype, name, pattern, principal, host, op, permission)
                    for rtype, name in resources for principal, permission in principals
                    for host in hosts[permission] for op in ops]
        for rtype, name in resources:
            mine = [b for b in bindings if b.restype == rtype and b.name == name]
            print(f"Adding ACLs for resource `{_resource_text(mine[0])}`: ")
            print("".join(f" \t{_show(b)} \n" for b in mine))
        try:
            for fut in admin.create_acls(bindings).values():
                fut.result(30)
        except Exception as e:
            fail(f"Error while executing ACL command: {e}")
        _list(admin, resources, pattern)
        return
    if not force and not typer.confirm(
            "Are you sure you want to remove ACLs from the given resources?"):
        return
    filters = []
    for rtype, name in resources:
        for principal, permission in principals or [(_ANY, AclPermissionType.ANY)]:
            for op in ops or [AclOperation.ANY]:
                filters.append(AclBindingFilter(rtype, name, pattern, principal, _ANY, op,
                                                permission))
    try:
        for fut in admin.delete_acls(filters).values():
            fut.result(30)
    except Exception as e:
        fail(f"Error while executing ACL command: {e}")
    _list(admin, resources, pattern)


def _list(admin: Any, resources: list[tuple[Any, str]], pattern: Any,
          principals: list[str] | None = None) -> None:
    """AclCommand's listing: every matching resource's ACLs; with principals, under
    `ACLs for principal …` each, only that principal's (and resources with some)."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    wanted = resources or [(ResourceType.ANY, _ANY)]
    filters = [AclBindingFilter(rtype, name, pattern if resources else ResourcePatternType.ANY,
                                _ANY, _ANY, AclOperation.ANY, AclPermissionType.ANY)
               for rtype, name in wanted]
    found: dict[str, list[Any]] = {}
    try:
        for f in filters:
            for b in admin.describe_acls(f).result(30):
                found.setdefault(_resource_text(b), []).append(b)
    except Exception as e:
        fail(f"Error while executing ACL command: {e}")
    if not principals:
        _print_found(found)
        return
    for who in principals:
        print(f"ACLs for principal `{who}`")
        _print_found({resource: mine for resource, bindings in found.items()
                      if (mine := [b for b in bindings if b.principal == who])})


def _print_found(found: dict[str, list[Any]]) -> None:
    for resource, bindings in found.items():
        print(f"Current ACLs for resource `{resource}`: ")
        print("".join(f" \t{_show(b)} \n" for b in bindings))
