"""The records of `__consumer_offsets`, in Kafka's own key and value schemas.

Sans-IO: bytes in, values out, and back. Tools that read the topic directly (Burrow,
Kafka's DumpLogSegments) understand what we write, and we read what Kafka wrote.

A record's key starts with an int16 record type (Kafka calls it the key version):
    0, 1  OffsetCommitKey    group · topic · partition
    2     GroupMetadataKey   group
    3+    KIP-848 consumer-group records (not written by us; reported as unknown)
and its value with an int16 value version. A null value is a tombstone.

Versions we write, and why:
- OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp), as Kafka 2.1+
  does; v1 when an expire timestamp is set (OffsetCommit v1 clients). Burrow 1.2.1
  parses value versions 0, 1 and 3 and nothing else.
- GroupMetadataValue v1 when no member is static: Burrow 1.2.1 parses versions 0 and 1
  only, and learns partition owners from them. v3 (the version Kafka 2.3+ writes) when
  a member has a group.instance.id, which v1 cannot hold.

The schema machinery (`Field`, `Struct`, `read_message`, `write_message`) is Kafka's
message serialization for the few field types these coordinator records use; the dump
tool reads the transaction log's records with it too.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "GROUP_METADATA_KEY",
    "GROUP_METADATA_VALUE",
    "OFFSET_COMMIT_KEY",
    "OFFSET_COMMIT_VALUE",
    "Field",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "Malformed",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "Struct",
    "UnknownKey",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_consumer_assignment",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "read_message",
    "write_message",
]

ALL_VERSIONS = 0x7FFF


@dataclass(frozen=True, slots=True)
class Field:
    name: str  # as Kafka's JSON converters name it (camelCase)
    kind: str | Struct  # int8 int16 int32 int64 string bytes []int32 []string, or []struct
    since: int = 0
    until: int = ALL_VERSIONS
    nullable: bool = False
    tag: int | None = None  # tagged fields are written only when not the default
    default: object = None


@dataclass(frozen=True, slots=True)
class Struct:
    name: str
    fields: tuple[Field, ...]
    flexible_since: int = ALL_VERSIONS + 1


# From Kafka's group-coordinator message definitions (OffsetCommitKey.json, …).
OFFSET_COMMIT_KEY = Struct(
    "OffsetCommitKey",
    (Field("group", "string"), Field("topic", "string"), Field("partition", "int32")),
)
GROUP_METADATA_KEY = Struct("GroupMetadataKey", (Field("group", "string"),))
OFFSET_COMMIT_VALUE = Struct(
    "OffsetCommitValue",
    (
        Field("offset", "int64"),
        Field("leaderEpoch", "int32", since=3),
        Field("metadata", "string"),
        Field("commitTimestamp", "int64"),
        Field("expireTimestamp", "int64", since=1, until=1),
    ),
    flexible_since=4,
)
MEMBER_METADATA = Struct(
    "MemberMetadata",
    (
        Field("memberId", "string"),
        Field("groupInstanceId", "string", since=3, nullable=True),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("rebalanceTimeout", "int32", since=1),
        Field("sessionTimeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ),
    flexible_since=4,
)
GROUP_METADATA_VALUE = Struct(
    "GroupMetadataValue",
    (
        Field("protocolType", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable=True),
        Field("leader", "string", nullable=True),
        Field("currentStateTimestamp", "int64", since=2),
        Field("members", MEMBER_METADATA),
    ),
    flexible_since=4,
)

_INTS = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}


class Malformed(Exception):
    """Bytes that do not parse as the schema says; the message is Kafka's wording."""


# ---------------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise Malformed(
                f"Error reading {n} byte(s): only {len(self.data) - self.pos} byte(s) available"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read_int(self, kind: str) -> int:
        codec = _INTS[kind]
        value: int = codec.unpack(self.take(codec.size))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise Malformed("varint is longer than 5 bytes")

    def length(self, flexible: bool, kind: str) -> int:
        if flexible:
            return self.uvarint() - 1
        return self.read_int("int16" if kind == "string" else "int32")


def _read_value(f: Field, r: _Reader, version: int, flexible: bool) -> object:
    kind = f.kind
    if isinstance(kind, str) and kind in _INTS:
        return r.read_int(kind)
    n = r.length(flexible, kind if isinstance(kind, str) else "array")
    if n < 0:
        if f.nullable:
            return None
        raise Malformed(f"non-nullable field {f.name} was serialized as null")
    if kind == "string":
        return r.take(n).decode("utf-8", "replace")
    if kind == "bytes":
        return r.take(n)
    if n > len(r.data) - r.pos:
        raise Malformed(
            f"Tried to allocate a collection of size {n}, but there are only "
            f"{len(r.data) - r.pos} bytes remaining."
        )
    if kind == "[]int32":
        return [r.read_int("int32") for _ in range(n)]
    if kind == "[]string":
        return [r.take(r.length(flexible, "string")).decode("utf-8", "replace") for _ in range(n)]
    assert isinstance(kind, Struct)
    return [_read_struct(kind, r, version) for _ in range(n)]


def _read_struct(spec: Struct, r: _Reader, version: int) -> dict[str, object]:
    flexible = version >= spec.flexible_since
    values: dict[str, object] = {}
    for f in spec.fields:
        if f.tag is None and f.since <= version <= f.until:
            values[f.name] = _read_value(f, r, version, flexible)
    if flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            data = r.take(r.uvarint())
            for f in spec.fields:
                if f.tag == tag and f.since <= version <= f.until:
                    values[f.name] = _read_value(f, _Reader(data), version, True)
    # Declaration order, as Kafka's JSON converters write; a tagged field only when it
    # differs from its default.
    return {
        f.name: values[f.name]
        for f in spec.fields
        if f.name in values and (f.tag is None or values[f.name] != f.default)
    }


def read_message(spec: Struct, data: bytes, part: str = "value") -> tuple[int, dict[str, object]]:
    """(version, fields by camelCase name) of a versioned key or value.

    Raises Malformed with the message Kafka's coordinator record serde gives.
    """
    r = _Reader(data)
    try:
        version = r.read_int("int16")
    except Malformed:
        raise Malformed(f"Could not read version from {part}'s buffer.") from None
    try:
        return version, _read_struct(spec, r, version)
    except Malformed as exc:
        raise Malformed(
            f"Could not read record with version {version} from {part}'s buffer due to: {exc}."
        ) from None


# ---------------------------------------------------------------------------- writing


def _uvarint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_length(out: bytearray, n: int, flexible: bool, kind: str) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _INTS["int16" if kind == "string" else "int32"].pack(n)


def _write_value(out: bytearray, f: Field, value: Any, version: int, flexible: bool) -> None:
    kind = f.kind
    if isinstance(kind, str) and kind in _INTS:
        out += _INTS[kind].pack(value)
        return
    if value is None:
        if not f.nullable:
            raise ValueError(f"field {f.name} is not nullable")
        _write_length(out, -1, flexible, kind if isinstance(kind, str) else "array")
        return
    if kind == "string":
        data = value.encode()
        _write_length(out, len(data), flexible, "string")
        out += data
    elif kind == "bytes":
        _write_length(out, len(value), flexible, "bytes")
        out += value
    elif kind == "[]int32":
        _write_length(out, len(value), flexible, "array")
        for item in value:
            out += _INTS["int32"].pack(item)
    elif kind == "[]string":
        _write_length(out, len(value), flexible, "array")
        for item in value:
            data = item.encode()
            _write_length(out, len(data), flexible, "string")
            out += data
    else:
        assert isinstance(kind, Struct)
        _write_length(out, len(value), flexible, "array")
        for item in value:
            _write_struct(out, kind, item, version)


def _write_struct(out: bytearray, spec: Struct, values: dict[str, Any], version: int) -> None:
    flexible = version >= spec.flexible_since
    tagged: list[tuple[int, bytes]] = []
    for f in spec.fields:
        if not f.since <= version <= f.until:
            continue
        value = values.get(f.name, f.default)
        if f.tag is not None:
            if flexible and value != f.default:
                buf = bytearray()
                _write_value(buf, f, value, version, True)
                tagged.append((f.tag, bytes(buf)))
            continue
        _write_value(out, f, value, version, flexible)
    if flexible:
        _uvarint(out, len(tagged))
        for tag, data in sorted(tagged):
            _uvarint(out, tag)
            _uvarint(out, len(data))
            out += data


def write_message(spec: Struct, version: int, values: dict[str, Any]) -> bytes:
    """The int16 version, then the fields of `values` (camelCase names) at that version."""
    out = bytearray(_INTS["int16"].pack(version))
    _write_struct(out, spec, values, version)
    return bytes(out)


# ---------------------------------------------------------------------------- typed records


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A record type we do not read (KIP-848's, share groups'): skipped on load."""

    record_type: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in v1


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


Key = OffsetCommitKey | GroupMetadataKey | UnknownKey


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return write_message(
            OFFSET_COMMIT_KEY, 1, {"group": key.group, "topic": key.topic,
                                   "partition": key.partition})
    return write_message(GROUP_METADATA_KEY, 2, {"group": key.group})


def decode_key(data: bytes) -> Key:
    if len(data) < 2:
        raise Malformed("Could not read version from key's buffer.")
    (record_type,) = _INTS["int16"].unpack_from(data)
    if record_type in (0, 1):
        _, v = read_message(OFFSET_COMMIT_KEY, data, "key")
        return OffsetCommitKey(str(v["group"]), str(v["topic"]), int(v["partition"]))  # type: ignore[call-overload]
    if record_type == 2:
        _, v = read_message(GROUP_METADATA_KEY, data, "key")
        return GroupMetadataKey(str(v["group"]))
    return UnknownKey(record_type)


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = 1 if value.expire_timestamp >= 0 else 3
    return write_message(OFFSET_COMMIT_VALUE, version, {
        "offset": value.offset,
        "leaderEpoch": value.leader_epoch,
        "metadata": value.metadata,
        "commitTimestamp": value.commit_timestamp,
        "expireTimestamp": value.expire_timestamp,
    })


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    _, v = read_message(OFFSET_COMMIT_VALUE, data)
    return OffsetCommitValue(
        offset=_int(v["offset"]),
        metadata=str(v.get("metadata") or ""),
        commit_timestamp=_int(v["commitTimestamp"]),
        leader_epoch=_int(v.get("leaderEpoch", -1)),
        expire_timestamp=_int(v.get("expireTimestamp", -1)),
    )


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def encode_group_metadata_value(value: GroupMetadataValue, version: int | None = None) -> bytes:
    if version is None:
        static = any(m.group_instance_id is not None for m in value.members)
        version = 3 if static else 1
    return write_message(GROUP_METADATA_VALUE, version, {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "currentStateTimestamp": value.current_state_timestamp,
        "members": [
            {
                "memberId": m.member_id,
                "groupInstanceId": m.group_instance_id,
                "clientId": m.client_id,
                "clientHost": m.client_host,
                "rebalanceTimeout": m.rebalance_timeout,
                "sessionTimeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in value.members
        ],
    })


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    _, v = read_message(GROUP_METADATA_VALUE, data)
    members = []
    raw_members = v["members"]
    assert isinstance(raw_members, list)
    for m in raw_members:
        session = _int(m["sessionTimeout"])
        members.append(MemberMetadata(
            member_id=str(m["memberId"]),
            client_id=str(m["clientId"]),
            client_host=str(m["clientHost"]),
            session_timeout=session,
            # v0 has no rebalance timeout: Kafka takes the session timeout
            rebalance_timeout=_int(m.get("rebalanceTimeout", session)),
            subscription=bytes(m["subscription"]),
            assignment=bytes(m["assignment"]),
            group_instance_id=m.get("groupInstanceId"),
        ))
    protocol, leader = v["protocol"], v["leader"]
    return GroupMetadataValue(
        protocol_type=str(v["protocolType"]),
        generation=_int(v["generation"]),
        protocol=None if protocol is None else str(protocol),
        leader=None if leader is None else str(leader),
        current_state_timestamp=_int(v.get("currentStateTimestamp", -1)),
        members=tuple(members),
    )


# ---------------------------------------------------------------------------- consumer protocol
# The classic "consumer" protocol's subscription and assignment (ConsumerProtocol*.json).
# The broker reads only the topics: which a member subscribes to, which partitions it owns.

_SUBSCRIPTION = Struct("ConsumerProtocolSubscription", (Field("topics", "[]string"),))
_TOPIC_PARTITIONS = Struct(
    "TopicPartition", (Field("topic", "string"), Field("partitions", "[]int32")))
_ASSIGNMENT = Struct(
    "ConsumerProtocolAssignment",
    (Field("assignedPartitions", _TOPIC_PARTITIONS), Field("userData", "bytes", nullable=True)),
)


def decode_consumer_subscription(data: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version), None if it does not parse."""
    try:
        _, v = read_message(_SUBSCRIPTION, data)
    except Malformed:
        return None
    topics = v["topics"]
    assert isinstance(topics, list)
    return [str(t) for t in topics]


def decode_consumer_assignment(data: bytes) -> dict[str, list[int]] | None:
    """{topic: partitions} of a ConsumerProtocolAssignment, None if it does not parse."""
    if not data:
        return {}
    try:
        _, v = read_message(_ASSIGNMENT, data)
    except Malformed:
        return None
    out: dict[str, list[int]] = {}
    parts = v["assignedPartitions"]
    assert isinstance(parts, list)
    for tp in parts:
        out.setdefault(str(tp["topic"]), []).extend(tp["partitions"])
    return out


def encode_consumer_assignment(assignment: dict[str, list[int]], version: int = 0) -> bytes:
    return write_message(_ASSIGNMENT, version, {
        "assignedPartitions": [{"topic": t, "partitions": sorted(p)}
                               for t, p in sorted(assignment.items())],
        "userData": None,
    })
