"""ACLs between the wire, the authorizer and the metadata store: one place converts
them, and applies a change to the stored set (the authorizer is built from it at
start, then follows each change in place)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import (
    AccessControlEntry,
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
from odradek.security.authorizer import AclAuthorizer

log = logging.getLogger(__name__)

Stored = tuple[str, ...]


def to_stored(b: AclBinding) -> Stored:
    p, e = b.pattern, b.entry
    return (p.resource_type.name, p.name, p.pattern_type.name, e.principal, e.host,
            e.operation.name, e.permission.name)


def from_stored(row: Stored) -> AclBinding:
    rtype, name, pattern, principal, host, op, perm = row
    return AclBinding(ResourcePattern(ResourceType[rtype], name, PatternType[pattern]),
                      AccessControlEntry(principal, host, AclOperation[op],
                                         AclPermissionType[perm]))


def load(authorizer: AclAuthorizer, rows: Iterable[Stored]) -> AclAuthorizer:
    """A fresh authorizer with the same settings and the stored ACLs."""
    fresh = AclAuthorizer(authorizer.super_users,
                          authorizer.no_acl_rule.label == "DefaultAllow")
    fresh.create_acls([from_stored(r) for r in rows])
    return fresh


def update(authorizer: AclAuthorizer, old: Iterable[Stored], new: Iterable[Stored]) -> None:
    """Apply what changed between two stored sets to a live authorizer, in place."""
    before, after = set(old), set(new)
    for row in before - after:
        authorizer.remove(from_stored(row))
    for row in after - before:
        try:
            authorizer.add(from_stored(row))
        except (InvalidAcl, KeyError, ValueError) as e:  # written badly by another tool
            log.warning("ignoring stored ACL %s: %s", row, e)


def binding_of(c: Any) -> AclBinding:
    """CreateAcls' AclCreation (v0 has no pattern type: LITERAL)."""
    try:
        return AclBinding(
            ResourcePattern(ResourceType(c.resource_type), c.resource_name,
                            PatternType(getattr(c, "resource_pattern_type",
                                                PatternType.LITERAL))),
            AccessControlEntry(c.principal, c.host, AclOperation(c.operation),
                               AclPermissionType(c.permission_type)))
    except ValueError as e:
        raise KafkaError(f"Invalid ACL: {e}", ErrorCode.invalid_request) from None


def filter_of(f: Any) -> AclBindingFilter:
    """DescribeAcls' request, or one of DeleteAcls' filters."""
    try:
        return AclBindingFilter(
            ResourcePatternFilter(ResourceType(f.resource_type_filter), f.resource_name_filter,
                                  PatternType(getattr(f, "pattern_type_filter",
                                                      PatternType.LITERAL))),
            AccessControlEntryFilter(f.principal_filter, f.host_filter,
                                     AclOperation(f.operation),
                                     AclPermissionType(f.permission_type)))
    except ValueError as e:
        raise KafkaError(f"Invalid ACL filter: {e}", ErrorCode.invalid_request) from None
