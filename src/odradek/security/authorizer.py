"""The ACL authorizer: Kafka's StandardAuthorizer decision, indexed.

A decision looks only at the ACLs that can apply: the literal ACLs of the resource's
name, the `*` ACLs of its type, and the PREFIXED ACLs whose prefix the name starts with
(one dict probe per prefix length present). 10,000 ACLs on other resources cost
nothing. Deny wins; ALLOW of READ/WRITE/DELETE/ALTER implies DESCRIBE and ALLOW of
ALTER_CONFIGS implies DESCRIBE_CONFIGS; `super.users` skip the ACLs; a resource with no
ACL at all gets `allow.everyone.if.no.acl.found`.

Every decision is logged on `kafka.authorizer.logger` in Kafka's line format: denials
at INFO, allows at DEBUG (TRACE-level detail when the action asked not to be logged).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.configdef import ConfigError
from odradek.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_filter,
    validate_new_acl,
)
from odradek.security.principal import WILDCARD_PRINCIPAL_STR, KafkaPrincipal

audit_log = logging.getLogger("kafka.authorizer.logger")
TRACE = 5

# Names Kafka's `authorizer.class.name` takes for this authorizer.
AUTHORIZER_CLASS_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "acl",
})

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS,
                                       AclOperation.ALTER_CONFIGS})


class Decision(enum.Enum):
    ALLOWED = "Allowed"
    DENIED = "Denied"


@dataclass(frozen=True)
class RequestContext:
    """Who asks, from where, in which request (Kafka's AuthorizableRequestContext)."""

    principal: KafkaPrincipal
    host: str
    request_name: str = "Unknown"  # Kafka's ApiKeys name, e.g. "Produce"


@dataclass(frozen=True)
class Action:
    operation: AclOperation
    resource_type: ResourceType
    name: str
    resource_ref_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


@dataclass(frozen=True)
class _Rule:
    decision: Decision
    label: str = ""
    acl: AclBinding | None = None  # formatted only if the line is logged

    @property
    def text(self) -> str:
        return f"MatchingAcl(acl={standard_acl_str(self.acl)})" if self.acl else self.label


_SUPER = _Rule(Decision.ALLOWED, "SuperUser")
_DEFAULT_ALLOW = _Rule(Decision.ALLOWED, "DefaultAllow")
_DEFAULT_DENY = _Rule(Decision.DENIED, "DefaultDeny")


def standard_acl_str(b: AclBinding) -> str:
    p, e = b.pattern, b.entry
    return (f"StandardAcl(resourceType={p.resource_type.name}, resourceName={p.name}, "
            f"patternType={p.pattern_type.name}, principal={e.principal}, host={e.host}, "
            f"operation={e.operation.name}, permissionType={e.permission.name})")


def _acl_result(op: AclOperation, principals: tuple[str, str], host: str,
                e: AccessControlEntry) -> Decision | None:
    """StandardAuthorizerData.findResult: None when the entry does not apply."""
    if e.principal not in principals:
        return None
    if e.host != WILDCARD and e.host != host:
        return None
    if e.operation != AclOperation.ALL:
        if e.permission == AclPermissionType.ALLOW:
            if op == AclOperation.DESCRIBE:
                if e.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if e.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != e.operation:
                return None
        elif op != e.operation:
            return None
    return Decision.ALLOWED if e.permission == AclPermissionType.ALLOW else Decision.DENIED


class AclAuthorizer:
    """ACL storage and decisions. Thread-safe: writes swap in new lists under a lock,
    reads take no lock (a decision sees one consistent list per resource)."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.no_acl_rule = _DEFAULT_ALLOW if allow_everyone_if_no_acl_found else _DEFAULT_DENY
        self._lock = threading.Lock()
        self._literal: dict[tuple[ResourceType, str], tuple[AclBinding, ...]] = {}
        self._prefixed: dict[tuple[ResourceType, str], tuple[AclBinding, ...]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        # how many PREFIXED resource names of each length exist, per type
        self._length_counts: dict[tuple[ResourceType, int], int] = {}
        self._count = 0

    @classmethod
    def from_config(cls, props: Mapping[str, str]) -> AclAuthorizer:
        """From broker properties: `super.users` (`;`-separated principals) and
        `allow.everyone.if.no.acl.found`."""
        supers = [s.strip() for s in props.get("super.users", "").split(";") if s.strip()]
        for s in supers:
            try:
                KafkaPrincipal.parse(s)
            except ValueError as e:
                raise ConfigError(f"super.users: {e}") from None
        raw = str(props.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise ConfigError(
                f"allow.everyone.if.no.acl.found: expected true or false, got {raw!r}")
        return cls(supers, raw == "true")

    # --- storage -------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _table(self, p: ResourcePattern) -> dict[tuple[ResourceType, str], tuple[AclBinding, ...]]:
        return self._literal if p.pattern_type == PatternType.LITERAL else self._prefixed

    def add(self, binding: AclBinding) -> bool:
        """Add one ACL (validated as Kafka validates CreateAcls); False if present."""
        validate_new_acl(binding)
        key = (binding.pattern.resource_type, binding.pattern.name)
        with self._lock:
            table = self._table(binding.pattern)
            current = table.get(key, ())
            if binding in current:
                return False
            table[key] = (*current, binding)
            self._count += 1
            if binding.pattern.pattern_type == PatternType.PREFIXED and not current:
                self._count_length(binding.pattern, +1)
            return True

    def remove(self, binding: AclBinding) -> bool:
        key = (binding.pattern.resource_type, binding.pattern.name)
        with self._lock:
            table = self._table(binding.pattern)
            current = table.get(key, ())
            if binding not in current:
                return False
            rest = tuple(b for b in current if b != binding)
            if rest:
                table[key] = rest
            else:
                del table[key]
                if binding.pattern.pattern_type == PatternType.PREFIXED:
                    self._count_length(binding.pattern, -1)
            self._count -= 1
            return True

    def _count_length(self, pattern: ResourcePattern, delta: int) -> None:
        rtype, key = pattern.resource_type, (pattern.resource_type, len(pattern.name))
        n = self._length_counts.get(key, 0) + delta
        if n:
            self._length_counts[key] = n
        else:
            del self._length_counts[key]
        if n in (0, 1):  # a length appeared or disappeared
            self._prefix_lengths[rtype] = tuple(sorted(
                length for (t, length) in self._length_counts if t == rtype))

    def resource_acls(self, pattern: ResourcePattern) -> list[AclBinding]:
        """The ACLs stored on exactly this resource pattern (one znode's content)."""
        key = (pattern.resource_type, pattern.name)
        return [b for b in self._table(pattern).get(key, ()) if b.pattern == pattern]

    def replace_resource(self, pattern: ResourcePattern,
                         entries: Iterable[AccessControlEntry]) -> None:
        """Make this resource's ACLs exactly `entries`: what a broker does when a
        `/kafka-acl-changes` notification names the resource and it re-reads the znode."""
        wanted = {AclBinding(pattern, e) for e in entries}
        for b in self.resource_acls(pattern):
            if b not in wanted:
                self.remove(b)
        for b in wanted:
            try:
                self.add(b)
            except InvalidAcl as e:  # a znode another tool wrote badly: skip that entry
                audit_log.warning("Ignoring invalid ACL %s: %s", b, e)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[InvalidAcl | None]:
        """CreateAcls: one result per binding, None for success (an existing ACL too)."""
        results: list[InvalidAcl | None] = []
        for b in bindings:
            try:
                self.add(b)
                results.append(None)
            except InvalidAcl as e:
                results.append(e)
        return results

    def acls(self, f: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: every ACL the filter matches."""
        validate_filter(f)
        out: list[AclBinding] = []
        for table in (self._literal, self._prefixed):
            for bindings in list(table.values()):
                out.extend(b for b in bindings if f.matches(b))
        return out

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: per filter, the ACLs it removed."""
        results = []
        for f in filters:
            matched = self.acls(f)
            results.append([b for b in matched if self.remove(b)])
        return results

    # --- decisions -----------------------------------------------------------------

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[Decision]:
        return [self.authorize_one(ctx, a) for a in actions]

    def authorize_one(self, ctx: RequestContext, action: Action) -> Decision:
        principal = str(ctx.principal)
        rule = _SUPER if principal in self.super_users else self._find_rule(
            (principal, WILDCARD_PRINCIPAL_STR), ctx.host, action)
        self._log(ctx, action, rule)
        return rule.decision

    def _find_rule(self, principals: tuple[str, str], host: str, action: Action) -> _Rule:
        rtype, name, op = action.resource_type, action.name, action.operation
        allow: AclBinding | None = None
        has_acls = False
        candidates: list[tuple[AclBinding, ...]] = []
        lit = self._literal.get((rtype, name))
        if lit:
            candidates.append(lit)
        for n in self._prefix_lengths.get(rtype, ()):
            if n > len(name):
                break
            pre = self._prefixed.get((rtype, name[:n]))
            if pre:
                candidates.append(pre)
        if name != WILDCARD:
            wild = self._literal.get((rtype, WILDCARD))
            if wild:
                candidates.append(wild)
        for group in candidates:
            has_acls = True
            for b in group:
                result = _acl_result(op, principals, host, b.entry)
                if result is Decision.DENIED:
                    return _Rule(Decision.DENIED, acl=b)
                if result is Decision.ALLOWED:
                    allow = b
        if allow is not None:
            return _Rule(Decision.ALLOWED, acl=allow)
        return _DEFAULT_DENY if has_acls else self.no_acl_rule

    def filter_authorized(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                          names: Iterable[str], *, log_if_allowed: bool = True,
                          log_if_denied: bool = True) -> set[str]:
        """Kafka's AuthHelper.filterByAuthorized: the names (deduplicated, each checked
        once with its count as resourceRefCount) the principal may `op`."""
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        return {n for n, count in counts.items()
                if self.authorize_one(ctx, Action(op, rtype, n, count, log_if_allowed,
                                                  log_if_denied)) is Decision.ALLOWED}

    def authorize_cluster(self, ctx: RequestContext, op: AclOperation, *,
                          log_if_denied: bool = True) -> bool:
        return self.authorize_one(ctx, Action(op, ResourceType.CLUSTER, CLUSTER_NAME,
                                              log_if_denied=log_if_denied)) is Decision.ALLOWED

    def authorize_by_resource_type(self, ctx: RequestContext, op: AclOperation,
                                   rtype: ResourceType) -> Decision:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do `op` on at
        least one resource of this type (used by InitProducerId without a
        transactional id, and by DescribeProducers-style checks)?"""
        if rtype in (ResourceType.ANY, ResourceType.UNKNOWN) or op in (
                AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl(f"Must specify a concrete operation and resource type, "
                             f"got {op.name} on {rtype.name}")
        probe = Action(op, rtype, "hardcode", log_if_allowed=False, log_if_denied=False)
        if self.authorize_one(ctx, probe) is Decision.ALLOWED:
            return Decision.ALLOWED
        principals = (str(ctx.principal), WILDCARD_PRINCIPAL_STR)
        deny_lit: set[str] = set()
        deny_pre: set[str] = set()
        allow_lit: set[str] = set()
        allow_pre: set[str] = set()
        for table, is_lit in ((self._literal, True), (self._prefixed, False)):
            for (t, name), bindings in list(table.items()):
                if t != rtype:
                    continue
                for b in bindings:
                    e = b.entry
                    if e.principal not in principals or e.host not in (WILDCARD, ctx.host):
                        continue
                    if e.operation not in (op, AclOperation.ALL):
                        continue
                    if e.permission == AclPermissionType.DENY:
                        (deny_lit if is_lit else deny_pre).add(name)
                    else:
                        (allow_lit if is_lit else allow_pre).add(name)
        if WILDCARD in deny_lit:
            return Decision.DENIED

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(p) for p in deny_pre)

        for name in allow_pre:
            if not denied_by_prefix(name):
                return Decision.ALLOWED
        for name in allow_lit:
            if name == WILDCARD or (name not in deny_lit and not denied_by_prefix(name)):
                return Decision.ALLOWED
        return Decision.DENIED

    def authorized_operations(self, ctx: RequestContext, rtype: ResourceType,
                              name: str) -> set[AclOperation]:
        """The operations a principal may do on a resource (the `authorized_operations`
        of Metadata, DescribeGroups, DescribeCluster); never logged as denials."""
        return {op for op in SUPPORTED_OPERATIONS.get(rtype, ())
                if self.authorize_one(ctx, Action(op, rtype, name, log_if_allowed=False,
                                                  log_if_denied=False)) is Decision.ALLOWED}

    @staticmethod
    def _log(ctx: RequestContext, action: Action, rule: _Rule) -> None:
        if rule.decision is Decision.ALLOWED:
            level = logging.DEBUG if action.log_if_allowed else TRACE
        else:
            level = logging.INFO if action.log_if_denied else TRACE
        if not audit_log.isEnabledFor(level):
            return
        audit_log.log(
            level,
            "Principal = %s is %s operation = %s from host = %s on resource = %s:LITERAL:%s "
            "for request = %s with resourceRefCount = %d based on rule %s",
            ctx.principal, rule.decision.value, action.operation.name, ctx.host,
            action.resource_type.pascal, action.name, ctx.request_name,
            action.resource_ref_count, rule.text,
        )
