"""Kafka's ZooKeeper layout for ACLs, as pure encode/decode functions.

- `/kafka-acl/<Type>/<name>` holds a LITERAL resource's ACLs,
  `/kafka-acl-extended/prefixed/<Type>/<name>` a PREFIXED one's; the value is
  `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`.
- A change is announced by a sequential znode `acl_changes_NNNNNNNNNN` under
  `/kafka-acl-changes` (value `TOPIC:name`, literal) or `/kafka-acl-extended-changes`
  (value `{"version":1,"resourceType":"TOPIC","name":…,"patternType":"PREFIXED"}`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from odradek.cluster.zk_acls import (
    CHANGE_PREFIX,
    EXTENDED_CHANGES,
    EXTENDED_ROOT,
    LITERAL_CHANGES,
    LITERAL_ROOT,
)
from odradek.cluster.zk_acls import ZNODE_VERSION as ACL_ZNODE_VERSION
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.principal import KafkaPrincipal

__all__ = ["CHANGE_PREFIX", "EXTENDED_CHANGES", "EXTENDED_ROOT", "LITERAL_CHANGES",
           "LITERAL_ROOT"]


class AclZnodeError(ValueError):
    """A znode whose content is not what Kafka writes there."""


def store_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ROOT
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ROOT}/{pattern_type.name.lower()}"
    raise AclZnodeError(f"no ACL store for pattern type {pattern_type.name}")


def all_roots() -> list[str]:
    """Every path Kafka creates at start-up for ACLs (so a watcher can wait on them)."""
    return [LITERAL_ROOT, store_root(PatternType.PREFIXED), LITERAL_CHANGES, EXTENDED_CHANGES]


def resource_path(pattern: ResourcePattern) -> str:
    return f"{store_root(pattern.pattern_type)}/{pattern.resource_type.pascal}/{pattern.name}"


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_root(pattern_type)}/{resource_type.pascal}"


def pattern_from_path(path: str) -> ResourcePattern:
    """The resource a `/kafka-acl…/<Type>/<name>` path stores."""
    for ptype in (PatternType.PREFIXED, PatternType.LITERAL):
        root = store_root(ptype) + "/"
        if path.startswith(root):
            rtype_name, sep, name = path[len(root):].partition("/")
            rtype = ResourceType.parse(rtype_name)
            if not sep or not name or rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
                break
            return ResourcePattern(ResourceType(rtype), name, ptype)
    raise AclZnodeError(f"not an ACL resource path: {path}")


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": e.permission.pascal,
             "operation": e.operation.pascal, "host": e.host}
            for e in sorted(set(entries), key=str)]
    return json.dumps({"version": ACL_ZNODE_VERSION, "acls": acls},
                      separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> list[AccessControlEntry]:
    """AclEntry.fromBytes: empty or null data is no ACLs; anything else must parse."""
    if not data:
        return []
    try:
        js = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise AclZnodeError(f"ACL znode is not JSON: {e}") from None
    if js is None:
        return []
    if not isinstance(js, dict) or js.get("version") != ACL_ZNODE_VERSION:
        raise AclZnodeError(f"ACL znode version must be {ACL_ZNODE_VERSION}")
    items = js.get("acls", [])
    if not isinstance(items, list):
        raise AclZnodeError("ACL znode: \"acls\" must be a list")
    out = []
    for item in items:
        try:
            principal = str(KafkaPrincipal.parse(item["principal"]))
            perm = AclPermissionType.parse(item["permissionType"])
            op = AclOperation.parse(item["operation"])
            host = item["host"]
        except (KeyError, TypeError, ValueError) as e:
            raise AclZnodeError(f"bad ACL entry {item!r}: {e}") from None
        out.append(AccessControlEntry(principal, str(host), AclOperation(op),
                                      AclPermissionType(perm)))
    return out


def decode_bindings(path: str, data: bytes | None) -> list[AclBinding]:
    pattern = pattern_from_path(path)
    return [AclBinding(pattern, e) for e in decode_acls(data)]


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(path prefix for a sequential create, value) announcing a change to `pattern`."""
    if pattern.pattern_type == PatternType.LITERAL:
        value = f"{pattern.resource_type.name}:{pattern.name}".encode()
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", value
    event = {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
             "patternType": pattern.pattern_type.name}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(
        event, separators=(",", ":")).encode()


def decode_change(changes_root: str, data: bytes) -> ResourcePattern:
    """The resource a change notification under `changes_root` names."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise AclZnodeError("ACL change notification is not UTF-8") from None
    if changes_root.rstrip("/") == LITERAL_CHANGES:
        rtype_name, sep, name = text.partition(":")
        rtype = ResourceType.parse(rtype_name)
        if not sep or rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclZnodeError(
                f"expected a string in format ResourceType:ResourceName but got {text}")
        return ResourcePattern(ResourceType(rtype), name, PatternType.LITERAL)
    try:
        js = json.loads(text)
        if int(js["version"]) > 1:
            raise AclZnodeError(
                f"Acl change event received for unsupported version: {js['version']}")
        rtype = ResourceType.parse(js["resourceType"])
        ptype = PatternType.parse(js["patternType"])
        name = str(js["name"])
    except (ValueError, KeyError, TypeError) as e:
        raise AclZnodeError(f"Failed to parse ACL change event: {e}") from None
    if rtype in (ResourceType.UNKNOWN, ResourceType.ANY) or not ptype.is_specific:
        raise AclZnodeError("Failed to convert ACL change event to resource")
    return ResourcePattern(ResourceType(rtype), name, PatternType(ptype))
