"""ACLs in ZooKeeper as Kafka's AclAuthorizer keeps them, for a broker's metadata store.

- `/kafka-acl/<Type>/<name>` holds a LITERAL resource's ACLs and
  `/kafka-acl-extended/prefixed/<Type>/<name>` a PREFIXED one's, as
  `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`.
- Every change is announced by a sequential `acl_changes_<seq>` under
  `/kafka-acl-changes` (value `TOPIC:name`, literal) or `/kafka-acl-extended-changes`
  (JSON naming type, name and pattern type). Brokers watch only these two lists and
  re-read the resource a new notification names, as Kafka's brokers do; the tree
  itself is read whole at start and after a reconnect. Notifications older than
  Kafka's 15 minutes are purged by whoever sees them.

ACLs travel as the metadata image's rows (resource type, name, pattern type,
principal, host, operation, permission; Kafka's upper-case names), the form the
embedded store keeps: this layer sits below security/, so it checks names, not types.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster.zk_data import EXTENDED_CHANGES as EXTENDED_CHANGES
from odradek.cluster.zk_data import EXTENDED_ROOT as EXTENDED_ROOT
from odradek.cluster.zk_data import LITERAL_CHANGES as LITERAL_CHANGES
from odradek.cluster.zk_data import LITERAL_ROOT as LITERAL_ROOT
from odradek.cluster.zk_data import PREFIXED_ROOT as PREFIXED_ROOT

if TYPE_CHECKING:
    from odradek.cluster.zk_client import ZkSession

log = logging.getLogger(__name__)

CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener default
ZNODE_VERSION = 1

RESOURCE_TYPES = frozenset({"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                            "DELEGATION_TOKEN", "USER"})
OPERATIONS = frozenset({"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                        "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                        "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"})
PERMISSIONS = frozenset({"ALLOW", "DENY"})
_TREES = {"LITERAL": LITERAL_ROOT, "PREFIXED": PREFIXED_ROOT}
_CHANGES = {LITERAL_CHANGES: "LITERAL", EXTENDED_CHANGES: "PREFIXED"}

Row = tuple[str, ...]  # (type, name, pattern, principal, host, operation, permission)
Key = tuple[str, str, str]  # (type, name, pattern)


class AclZnodeError(ValueError):
    """A znode whose content is not what Kafka writes there."""


def upper_name(text: str) -> str:
    """`ClusterAction` (ZooKeeper, tools) and `CLUSTER_ACTION` (toString) alike."""
    if text.isupper() or "_" in text:
        return text.upper()
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).upper()


def pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def resource_path(key: Key) -> str:
    rtype, name, pattern = key
    return f"{_TREES[pattern]}/{pascal(rtype)}/{name}"


def key_of(row: Row) -> Key:
    return row[0], row[1], row[2]


# ---- znode values -----------------------------------------------------------------------

def encode_entries(rows: Iterable[Row]) -> bytes:
    acls = [{"principal": r[3], "permissionType": pascal(r[6]), "operation": pascal(r[5]),
             "host": r[4]} for r in sorted(set(rows))]
    return json.dumps({"version": ZNODE_VERSION, "acls": acls},
                      separators=(",", ":")).encode()


def decode_entries(key: Key, data: bytes | None) -> list[Row]:
    """A resource znode's ACLs as rows; an entry Kafka could not have written is
    logged and left out (one bad entry must not cost a broker all the others)."""
    if not data:
        return []
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise AclZnodeError(f"{resource_path(key)}: not JSON ({e})") from None
    if body is None:
        return []
    if not isinstance(body, dict) or body.get("version") != ZNODE_VERSION:
        raise AclZnodeError(f"{resource_path(key)}: version must be {ZNODE_VERSION}")
    rows: list[Row] = []
    for item in body.get("acls") or []:
        try:
            principal, host = str(item["principal"]), str(item["host"])
            op, perm = upper_name(item["operation"]), upper_name(item["permissionType"])
        except (KeyError, TypeError, AttributeError):
            op = perm = principal = host = ""
        if ":" not in principal or op not in OPERATIONS or perm not in PERMISSIONS:
            log.warning("%s: skipping an ACL entry Kafka would not write: %r",
                        resource_path(key), item)
            continue
        rows.append((*key, principal, host, op, perm))
    return rows


def change_notification(key: Key) -> tuple[str, bytes]:
    """(prefix of the sequential znode, value) announcing a change of `key`."""
    rtype, name, pattern = key
    if pattern == "LITERAL":
        # the Java enum's toString, TOPIC (paths and entries use SecurityUtils' Topic)
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{rtype}:{name}".encode()
    event = {"version": 1, "resourceType": rtype, "name": name, "patternType": pattern}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(
        event, separators=(",", ":")).encode()


def decode_change(changes_root: str, data: bytes) -> Key:
    try:
        text = data.decode()
        if changes_root == LITERAL_CHANGES:
            type_name, sep, name = text.partition(":")
            key: Key = (upper_name(type_name), name, "LITERAL")
            if not sep:
                raise AclZnodeError(f"expected ResourceType:ResourceName, got {text}")
        else:
            body = json.loads(text)
            if int(body["version"]) > 1:
                raise AclZnodeError(f"unsupported ACL change event version {body['version']}")
            key = (upper_name(str(body["resourceType"])), str(body["name"]),
                   upper_name(str(body["patternType"])))
    except (ValueError, KeyError, TypeError) as e:
        raise AclZnodeError(f"bad ACL change event: {e}") from None
    if key[0] not in RESOURCE_TYPES or key[2] not in _TREES:
        raise AclZnodeError(f"ACL change event names no ACL resource: {text}")
    return key


def _seq(name: str) -> int:
    digits = name.removeprefix(CHANGE_PREFIX)
    return int(digits) if digits.isdigit() else -1


# ---- writing (blocking: the store's admin thread) --------------------------------------------

def changes_between(old: Iterable[Row], new: Iterable[Row]) -> dict[Key, tuple[set[Row], set[Row]]]:
    """{resource: (rows added, rows removed)} from one set of rows to another."""
    before, after = set(old), set(new)
    out: dict[Key, tuple[set[Row], set[Row]]] = {}
    for row in after - before:
        out.setdefault(key_of(row), (set(), set()))[0].add(row)
    for row in before - after:
        out.setdefault(key_of(row), (set(), set()))[1].add(row)
    return out


def apply_changes(zk: ZkSession, changes: Mapping[Key, tuple[set[Row], set[Row]]]) -> None:
    """Add and remove rows of each resource in its znode, version-checked (two brokers
    changing one resource at once both land, as Kafka's updateResourceAcls retries),
    then announce each change."""
    for key, (added, removed) in sorted(changes.items()):
        if key[0] not in RESOURCE_TYPES or key[2] not in _TREES:
            raise AclZnodeError(f"no ACL store for {key}")
        path = resource_path(key)
        while True:
            found = zk.get(path)
            current = set(decode_entries(key, found[0])) if found else set()
            wanted = (current - removed) | added
            if wanted == current:
                break
            try:
                if found is None:
                    zk.create(path, encode_entries(wanted), makepath=True)
                elif not wanted:
                    zk.delete(path, version=found[1].version)
                else:
                    zk.set(path, encode_entries(wanted), version=found[1].version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # changed meanwhile: merge again
        prefix, value = change_notification(key)
        zk.create(prefix, value, sequence=True, makepath=True)


def purge_expired(zk: ZkSession, root: str, now_ms: int,
                  expiration_ms: int = CHANGE_EXPIRATION_MS) -> int:
    """Delete the notifications under `root` older than `expiration_ms`, oldest first
    (ZkNodeChangeNotificationListener's purge; any broker may do it, a notification
    another broker deleted first is skipped). How many this call deleted."""
    deleted = 0
    for name in sorted(zk.children(root), key=lambda n: (_seq(n), n)):
        stat = zk.exists(f"{root}/{name}")
        if stat is None:
            continue
        if now_ms - stat.ctime <= expiration_ms:
            break  # sequential: the rest are younger
        try:
            zk.delete(f"{root}/{name}", version=stat.version)
            deleted += 1
        except (NoNodeError, BadVersionError):
            continue
    return deleted


# ---- reading: what a broker keeps ------------------------------------------------------------

class AclCache:
    """The ACL rows a broker knows, fed by the store's reads of the paths it names."""

    def __init__(self) -> None:
        self.by_key: dict[Key, tuple[Row, ...]] = {}
        self._rows: tuple[Row, ...] | None = ()  # sorted, rebuilt after a change only
        self._seen: dict[str, int | None] = {root: None for root in _CHANGES}

    def rows(self) -> tuple[Row, ...]:
        """Every row (resources in the order first read); the same tuple until something
        changes: the image is rebuilt on every metadata change, ACLs rarely among them."""
        if self._rows is None:
            self._rows = tuple(r for rows in self.by_key.values() for r in rows)
        return self._rows

    @staticmethod
    def handles(path: str) -> bool:
        """Every ACL path: the two trees and the two change lists."""
        return path.startswith(LITERAL_ROOT)

    @staticmethod
    def watched(path: str) -> bool:
        """Only the two change lists are watched; everything else is read on demand."""
        return path in _CHANGES

    @staticmethod
    def is_children(path: str) -> bool:
        if path in _CHANGES:
            return True
        for tree in _TREES.values():
            if path == tree or (path.startswith(tree + "/") and "/" not in path[len(tree) + 1:]):
                return True
        return False

    def apply(self, path: str, kind: str, value: Any, full: bool) -> set[str]:
        """One read into the cache; returns the paths it leads to."""
        if path in _CHANGES:
            return self._changes(path, list(value or ()), full)
        for changes_root in _CHANGES:
            if path.startswith(changes_root + "/"):
                return self._notification(changes_root, path, kind, value)
        for pattern, tree in _TREES.items():
            if path == tree:
                types = {upper_name(t) for t in value or ()}
                for key in [k for k in self.by_key if k[2] == pattern and k[0] not in types]:
                    del self.by_key[key]
                    self._rows = None
                return {f"{tree}/{t}" for t in value or () if upper_name(t) in RESOURCE_TYPES}
            if path.startswith(tree + "/"):
                type_name, _, name = path[len(tree) + 1:].partition("/")
                rtype = upper_name(type_name)
                if not name:  # a type's children: its resources
                    names = set(value or ())
                    for key in [k for k in self.by_key
                                if k[2] == pattern and k[0] == rtype and k[1] not in names]:
                        del self.by_key[key]
                        self._rows = None
                    return {f"{path}/{n}" for n in names}
                self._resource((rtype, name, pattern), kind, value)
        return set()

    def _changes(self, root: str, names: list[str], full: bool) -> set[str]:
        seqs = sorted((_seq(n), n) for n in names if _seq(n) >= 0)
        seen = self._seen[root]
        newest = seqs[-1][0] if seqs else -1
        if full or seen is None:
            # read the list before the tree: a change after this read is announced anew
            self._seen[root] = max(newest, seen if seen is not None else -1)
            return {_TREES[_CHANGES[root]]}
        self._seen[root] = max(seen, newest)
        return {f"{root}/{n}" for s, n in seqs if s > seen}

    def _notification(self, root: str, path: str, kind: str, value: Any) -> set[str]:
        if kind != "data":
            return set()  # purged meanwhile
        try:
            key = decode_change(root, value)
        except AclZnodeError as e:
            log.warning("%s: %s", path, e)
            return set()
        return {resource_path(key)}

    def _resource(self, key: Key, kind: str, value: Any) -> None:
        self._rows = None
        if kind != "data":
            self.by_key.pop(key, None)
            return
        try:
            rows = decode_entries(key, value)
        except AclZnodeError as e:
            log.warning("%s", e)
            rows = []
        if rows:
            self.by_key[key] = tuple(sorted(rows))
        else:
            self.by_key.pop(key, None)
