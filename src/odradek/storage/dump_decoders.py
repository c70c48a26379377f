"""How `dump-log` shows a record's key and value, as Kafka's DumpLogSegments does.

Three parsers, each `record -> (key text or None, value text or None)`:
- `parse_string`: the bytes as UTF-8 (Kafka's default StringDecoder);
- `parse_offsets`: `__consumer_offsets` records (`--offsets-decoder`);
- `parse_transaction_log`: `__transaction_state` records (`--transaction-log-decoder`).

The coordinator records are printed as Kafka 4.x prints them, JSON written the way its
generated JsonConverters and Jackson write it:
    key:   {"type":"<record type>","data":{...}}
    value: {"version":"<value version>","data":{...}}   or <DELETE> for a tombstone
A record whose key or value does not parse is shown as "Error at offset N, skipping. …".

Record types decoded: OffsetCommit (0, 1), GroupMetadata (2) and TransactionLog (0).
KIP-848 consumer-group records (3+) are reported as unknown record types.

Also here, because it is the same JSON: the KRaft control records (leader change,
snapshot header and footer, kraft.version, voters) via kio's schemas.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import importlib
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.serial import entity_reader

from odradek.protocol.group_records import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    Malformed,
    Struct,
    read_message,
)
from odradek.protocol.records import Record
from odradek.protocol.txn_records import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE

__all__ = [
    "DecoderError",
    "Parser",
    "control_record_json",
    "parse_offsets",
    "parse_string",
    "parse_transaction_log",
    "to_json",
]

Parser = Callable[[Record], tuple[str | None, str | None]]


class DecoderError(Exception):
    """A record the decoder cannot even start on; Kafka's tool stops there too."""


# ---------------------------------------------------------------------------- JSON

# Jackson escapes control characters with the short forms where JSON has one and as
# \\u00XX (upper-case hex) otherwise; Python's json module writes lower-case hex.
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _quote(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def to_json(value: object) -> str:
    """Compact JSON as Jackson's `JsonNode.toString()` writes it; bytes become base64."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes | bytearray):
        return _quote(base64.b64encode(value).decode())
    if isinstance(value, list | tuple):
        return "[" + ",".join(to_json(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_quote(str(k))}:{to_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


# ---------------------------------------------------------------------------- schemas
# The coordinators' records and their readers live in protocol/group_records.py and
# protocol/txn_records.py.

_INT16 = struct.Struct(">h")


# ---------------------------------------------------------------------------- kio structs


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _kio_json(value: object, kafka_type: object = None) -> object:
    """A kio entity as Kafka's JsonConverter writes the same message."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, object] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if "tag" in f.metadata and item == f.default:
                continue
            out[_camel(f.name)] = _kio_json(item, f.metadata.get("kafka_type"))
        return out
    if isinstance(value, tuple):
        return [_kio_json(item, kafka_type) for item in value]
    if kafka_type == "uuid":
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(16)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _kio_class(module: str, version: int, name: str) -> Any:
    try:
        return getattr(importlib.import_module(f"kio.schema.{module}.v{version}.data"), name)
    except (ImportError, AttributeError):
        return None


def _read_kio(cls: Any, data: bytes, offset: int) -> object:
    entity, _ = entity_reader(cls)(data, offset)
    return _kio_json(entity)


def _consumer_protocol(data: object, module: str, name: str) -> object:
    """The embedded consumer protocol's JSON, or None when the bytes do not parse.

    Kafka reads with the version the bytes start with and keeps the raw bytes when
    that fails, a version it does not know included.
    """
    if not isinstance(data, bytes) or len(data) < 2:
        return None
    (version,) = _INT16.unpack_from(data)
    cls = _kio_class(module, version, name) if 0 <= version <= 3 else None
    if cls is None:
        return None
    try:
        return _read_kio(cls, data, 2)
    except Exception:  # any malformed input: Kafka swallows it and keeps the bytes
        return None


def _expand_consumer_protocol(value: dict[str, object]) -> None:
    if value.get("protocolType") != "consumer":
        return
    members = value.get("members")
    for member in members if isinstance(members, list) else ():
        for field, module, name in (
            ("subscription", "consumer_protocol_subscription", "ConsumerProtocolSubscription"),
            ("assignment", "consumer_protocol_assignment", "ConsumerProtocolAssignment"),
        ):
            decoded = _consumer_protocol(member.get(field), module, name)
            if decoded is not None:
                member[field] = decoded


_KRAFT_CONTROL = {
    2: ("leader_change_message", "LeaderChangeMessage"),
    3: ("snapshot_header_record", "SnapshotHeaderRecord"),
    4: ("snapshot_footer_record", "SnapshotFooterRecord"),
    5: ("k_raft_version_record", "KRaftVersionRecord"),
    6: ("voters_record", "VotersRecord"),
}


def control_record_json(control_type: int, value: bytes | None) -> str:
    """The JSON of a KRaft control record's value (read as version 0, as Kafka does)."""
    module, name = _KRAFT_CONTROL[control_type]
    if value is None:
        raise DecoderError(f"{name} control record has no value")
    try:
        return to_json(_read_kio(_kio_class(module, 0, name), value, 0))
    except Exception as exc:  # kio's reader raises several types on malformed input
        raise DecoderError(f"{name} control record does not parse: {exc}") from None


# ---------------------------------------------------------------------------- parsers


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def parse_string(record: Record) -> tuple[str | None, str | None]:
    return _text(record.key), _text(record.value)


def _parse_coordinator(
    record: Record,
    types: Mapping[int, tuple[Struct, Struct]],
    expand: Callable[[dict[str, object]], None] | None = None,
) -> tuple[str | None, str | None]:
    if record.key is None:
        raise DecoderError(
            f"Failed to decode message at offset {record.offset} using the specified "
            "decoder (message had a missing key)"
        )
    try:
        if len(record.key) < 2:
            raise Malformed("Could not read version from key's buffer.")
        (record_type,) = _INT16.unpack_from(record.key)
        if record_type not in types:
            return f"Unknown record type {record_type} at offset {record.offset}, skipping.", None
        key_spec, value_spec = types[record_type]
        _, key = read_message(key_spec, record.key, "key")
        key_json = to_json({"type": str(record_type), "data": key})
        if record.value is None:
            return key_json, "<DELETE>"
        version, value = read_message(value_spec, record.value, "value")
    except Malformed as exc:
        return f"Error at offset {record.offset}, skipping. {exc}", None
    if expand is not None:
        expand(value)
    return key_json, to_json({"version": str(version), "data": value})


_GROUP_TYPES = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
}
_TRANSACTION_TYPES = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}


def parse_offsets(record: Record) -> tuple[str | None, str | None]:
    return _parse_coordinator(record, _GROUP_TYPES, _expand_consumer_protocol)


def parse_transaction_log(record: Record) -> tuple[str | None, str | None]:
    return _parse_coordinator(record, _TRANSACTION_TYPES)
