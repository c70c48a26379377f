"""ACLs on the registry's own resources, in Redpanda's model: SUBJECT (one subject, a
literal name, `*`, or a prefix) and REGISTRY (the global /config, /mode and schema-id
lookups); operations READ, WRITE, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, ALL;
ALLOW and DENY, a DENY winning.

They live as Confluent keeps its registry ACLs: in a compacted topic of their own beside
`_schemas` (`<kafkastore.topic>_acl`, Confluent's `confluent.schema.registry.acl.topic`),
one record per binding, its key the binding's JSON and a null value removing it. Every
registry instance tails that topic, so an ACL added by `odradek schemas acl add` (which
writes to the topic directly, as Confluent's sr-acl-cli does) reaches all of them.
The broker's authorizer is not involved: these resource types mean nothing to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SUBJECT, REGISTRY = "SUBJECT", "REGISTRY"
RESOURCE_TYPES = (SUBJECT, REGISTRY)
OPERATIONS = ("ALL", "READ", "WRITE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
PERMISSIONS = ("ALLOW", "DENY")
REGISTRY_NAME = ""  # the one REGISTRY resource
WILDCARD = "*"
# Kafka's implication: an ALLOW of any of these grants DESCRIBE, and ALTER_CONFIGS grants
# DESCRIBE_CONFIGS (AclAuthorizer.scala), so a writer sees its subject in /subjects.
IMPLIES = {"DESCRIBE": {"READ", "WRITE", "DELETE", "ALTER_CONFIGS"},
           "DESCRIBE_CONFIGS": {"ALTER_CONFIGS"}}


@dataclass(frozen=True)
class RegistryAcl:
    principal: str  # User:alice, or User:* for everyone
    resource_type: str
    name: str
    operation: str
    permission: str = "ALLOW"
    pattern_type: str = "LITERAL"

    def __post_init__(self) -> None:
        for value, allowed, what in (
                (self.resource_type, RESOURCE_TYPES, "resource type"),
                (self.operation, OPERATIONS, "operation"),
                (self.permission, PERMISSIONS, "permission"),
                (self.pattern_type, PATTERN_TYPES, "pattern type")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}: one of {', '.join(allowed)}")
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            raise ValueError(f"principal {self.principal!r}: expected Type:name, "
                             f"e.g. User:alice")

    def key(self) -> bytes:
        return json.dumps({"keytype": "ACL", "principal": self.principal,
                           "resourceType": self.resource_type, "name": self.name,
                           "patternType": self.pattern_type, "operation": self.operation,
                           "permission": self.permission, "magic": 0},
                          separators=(",", ":")).encode()

    @staticmethod
    def from_key(key: dict[str, Any]) -> RegistryAcl:
        return RegistryAcl(str(key["principal"]), str(key["resourceType"]), str(key["name"]),
                           str(key["operation"]), str(key["permission"]),
                           str(key["patternType"]))

    def covers(self, resource_type: str, name: str) -> bool:
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == "PREFIXED":
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)

    def __str__(self) -> str:
        resource = ("registry" if self.resource_type == REGISTRY
                    else f"subject {self.name!r}"
                    + (" (prefixed)" if self.pattern_type == "PREFIXED" else ""))
        return f"{self.principal} {self.permission} {self.operation} on {resource}"


def decode(key: bytes, value: bytes | None) -> tuple[dict[str, Any], bool]:
    """A record of the ACL topic: the key's JSON, and whether the binding is present."""
    k = json.loads(key)
    if not isinstance(k, dict) or k.get("keytype") != "ACL":
        raise ValueError("not a registry ACL key")
    return k, value is not None


class AclState:
    """The ACL topic replayed: the bindings present now, indexed so that a check looks
    at the user's ACLs on that name plus its wildcard and prefixed ones, not at all of
    them (a filtered `GET /subjects` runs one check per subject)."""

    def __init__(self) -> None:
        self.offset = -1
        # (principal, resource type, literal name) -> its ACLs
        self.literal: dict[tuple[str, str, str], set[RegistryAcl]] = {}
        # principal -> its `*` and PREFIXED ACLs
        self.patterns: dict[str, set[RegistryAcl]] = {}

    @property
    def acls(self) -> set[RegistryAcl]:
        return set().union(*self.literal.values(), *self.patterns.values())

    def apply(self, key: dict[str, Any], present: bool, offset: int) -> None:
        self.offset = max(self.offset, offset)
        self.put(RegistryAcl.from_key(key), present)

    def put(self, acl: RegistryAcl, present: bool) -> None:
        if acl.pattern_type == "LITERAL" and acl.name != WILDCARD:
            found = self.literal.setdefault((acl.principal, acl.resource_type, acl.name),
                                            set())
        else:
            found = self.patterns.setdefault(acl.principal, set())
        if present:
            found.add(acl)
        else:
            found.discard(acl)

    def applicable(self, principal: str, resource_type: str, name: str
                   ) -> Iterator[RegistryAcl]:
        for who in (principal, "User:*"):
            yield from self.literal.get((who, resource_type, name), ())
            for acl in self.patterns.get(who, ()):
                if acl.covers(resource_type, name):
                    yield acl


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


class AccessDenied(Exception):
    def __init__(self, user: str, operation: str, resource_type: str, name: str) -> None:
        what = "Registry" if resource_type == REGISTRY else f"{_pascal(resource_type)}: {name}"
        super().__init__(f"User {user} is denied operation {_pascal(operation)} on {what}")


class RegistryAuthorizer:
    """Decides for a basic-auth user; super users (`super.users`' `User:name;...`)
    bypass it, as the broker's do."""

    def __init__(self, state: AclState, super_users: frozenset[str] = frozenset()) -> None:
        self.state = state
        self.super_users = super_users

    def allowed(self, user: str, operation: str, resource_type: str, name: str) -> bool:
        principal = f"User:{user}"
        if principal in self.super_users:
            return True
        ops = {operation, "ALL", *IMPLIES.get(operation, ())}
        allow = False
        for acl in self.state.applicable(principal, resource_type, name):
            if acl.permission == "DENY" and acl.operation in (operation, "ALL"):
                return False
            if acl.permission == "ALLOW" and acl.operation in ops:
                allow = True
        return allow

    def check(self, user: str, operation: str, resource_type: str,
              name: str = REGISTRY_NAME) -> None:
        if not self.allowed(user, operation, resource_type, name):
            raise AccessDenied(user, operation, resource_type, name)


def parse_super_users(text: str) -> frozenset[str]:
    return frozenset(u.strip() for u in text.split(";") if u.strip())
