"""Metadata responses at size: each topic's entry encoded once per version, and the
response spliced around the encoded entries.

A full Metadata of 20,000 partitions built and encoded 20,000 partition entities per
request (a quarter of a second). A topic's entry depends only on its `TopicInfo` —
while no log dir is offline and every hosted partition opened (the handler's slow path
otherwise) — so it is kept, encoded, until the topic's entry in the image changes:
the embedded controller keeps the same `TopicInfo` for an unchanged topic, and a new
one for any change of its leaders, ISRs, partitions or configs.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from odradek.cluster.metadata import TopicInfo
from odradek.protocol.messages import encode_response
from odradek.server.handlers.base import Encoded

_I32 = struct.Struct(">i")
_FIXED_SIZES = {"int8": 1, "bool": 1, "int16": 2, "error_code": 2, "int32": 4,
                "timedelta_i32": 4, "int64": 8, "uuid": 16}


@dataclass(frozen=True)
class MetadataFrame(Encoded):
    """A whole Metadata response frame. `throttle_time` is a field, so that the quota
    step sets it as it does on a built response: it is patched into the frame."""

    throttle_time: datetime.timedelta = datetime.timedelta(0)
    throttle_at: int = -1  # where throttle_time_ms sits in the frame (-1: v0-2 have none)

    def __post_init__(self) -> None:
        if self.throttle_at >= 0 and self.throttle_time:
            assert isinstance(self.frame, bytes)  # built whole here, never file parts
            frame = bytearray(self.frame)
            _I32.pack_into(frame, self.throttle_at,
                           int(self.throttle_time.total_seconds() * 1000))
            object.__setattr__(self, "frame", bytes(frame))


_writers: dict[type, Callable[[Any, Any], None]] = {}


def encode_entity(entity: Any) -> bytes:
    cls = type(entity)
    writer = _writers.get(cls)
    if writer is None:
        writer = _writers[cls] = entity_writer(cls)
    buf = io.BytesIO()
    writer(buf, entity)
    return buf.getvalue()


def _tail_size(response_cls: type) -> int:
    """Bytes after the `topics` array in a response body: its fixed-size fields, then
    the (empty) tagged fields of a flexible version."""
    names = [f.name for f in dataclasses.fields(response_cls)]
    size = 0
    for f in dataclasses.fields(response_cls)[names.index("topics") + 1:]:
        size += _FIXED_SIZES[f.metadata["kafka_type"]]
    return size + (1 if getattr(response_cls, "__flexible__", False) else 0)


class TopicEntries:
    """One broker's encoded topic entries: name → (TopicInfo, {version: bytes})."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[TopicInfo, dict[int, bytes]]] = {}

    def get(self, topic: TopicInfo, version: int, build: Callable[[], Any]) -> bytes:
        held = self._entries.get(topic.name)
        if held is None or held[0] is not topic:
            held = (topic, {})
            self._entries[topic.name] = held
        encoded = held[1].get(version)
        if encoded is None:
            encoded = held[1][version] = encode_entity(build())
        return encoded

    def forget_missing(self, topics: dict[str, TopicInfo]) -> None:
        """Drop deleted topics' entries (called when the cache outgrew the image)."""
        if len(self._entries) > 2 * len(topics) + 100:
            for name in [n for n in self._entries if n not in topics]:
                del self._entries[name]


_by_source: weakref.WeakKeyDictionary[Any, TopicEntries] = weakref.WeakKeyDictionary()


def entries_for(metadata_source: Any) -> TopicEntries:
    """The cache of the broker whose metadata source (its controller) this is."""
    entries = _by_source.get(metadata_source)
    if entries is None:
        entries = _by_source[metadata_source] = TopicEntries()
    return entries


def splice(version: int, correlation_id: int, empty: Any, topics: Iterable[bytes]
           ) -> MetadataFrame:
    """The frame of `empty` (the response with no topics) with the encoded `topics`
    as its topics array."""
    cls = type(empty)
    frame = encode_response(3, version, correlation_id, empty)
    flexible = bool(cls.__flexible__)
    at = len(frame) - _tail_size(cls) - (1 if flexible else 4)
    marker = b"\x01" if flexible else b"\0\0\0\0"
    if frame[at:at + len(marker)] != marker:  # the schema moved: a bug here, not input
        raise AssertionError(f"Metadata v{version}: no empty topics array at {at}")
    body = list(topics)
    count = _varint(len(body) + 1) if flexible else _I32.pack(len(body))
    out = bytearray(frame[:at])
    out += count
    for entry in body:
        out += entry
    out += frame[at + len(marker):]
    _I32.pack_into(out, 0, len(out) - 4)
    # throttle_time_ms (v3+) is the body's first field, after the response header
    throttle_at = (8 + (1 if flexible else 0)) if version >= 3 else -1
    return MetadataFrame(bytes(out), throttle_at=throttle_at)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
