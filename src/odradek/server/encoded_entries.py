"""Listing responses at size: each listed item's entry encoded once per version, and
the response spliced around the encoded entries.

A listing of thousands of items (Metadata's topics, ListGroups' groups) built and
encoded one kio entity per item per request, through kio's pure-Python writer. An
item's entry depends only on a small stamp (a topic's `TopicInfo`, a group's id,
state, type and protocol type), so its encoding is kept until the stamp moves: the
handler reads the live stamp on every request, and so a change shows in the very
next answer.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import operator
import struct
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kio.serial import entity_writer

from odradek.protocol.messages import encode_response
from odradek.server.handlers.base import Encoded

_I32 = struct.Struct(">i")
_FIXED_SIZES = {"int8": 1, "bool": 1, "int16": 2, "error_code": 2, "int32": 4,
                "timedelta_i32": 4, "int64": 8, "uuid": 16}

S = TypeVar("S")


@dataclass(frozen=True)
class SplicedFrame(Encoded):
    """A whole response frame. `throttle_time` is a field, so that the quota step sets
    it as it does on a built response: it is patched into the frame."""

    throttle_time: datetime.timedelta = datetime.timedelta(0)
    throttle_at: int = -1  # where throttle_time_ms sits in the frame (-1: none)

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


class EncodedEntries(Generic[S]):
    """Encoded entries: key → (stamp, {version: bytes}). An entry is re-encoded when
    the stamp it was encoded from is no longer `same` as the live one."""

    def __init__(self, same: Callable[[S, S], bool] = operator.eq) -> None:
        self._same = same
        self._entries: dict[str, tuple[S, dict[int, bytes]]] = {}

    def get(self, key: str, stamp: S, version: int,
            build: Callable[[str, S], Any]) -> bytes:
        """`key`'s entry at `version`, encoded from `build(key, stamp)` on a miss (one
        builder per listing, not a closure per item: this runs per item per request)."""
        held = self._entries.get(key)
        if held is None or not self._same(held[0], stamp):
            held = (stamp, {})
            self._entries[key] = held
        encoded = held[1].get(version)
        if encoded is None:
            encoded = held[1][version] = encode_entity(build(key, stamp))
        return encoded

    def __len__(self) -> int:
        return len(self._entries)

    def forget_missing(self, live: Collection[str]) -> None:
        """Drop the entries of items gone (the caller calls it when the cache has
        outgrown `live`, so that a listing does not build `live` every time)."""
        for key in [k for k in self._entries if k not in live]:
            del self._entries[key]


def _tail_size(response_cls: type, array: str) -> int:
    """Bytes after the `array` field in a response body: its fixed-size fields, then
    the (empty) tagged fields of a flexible version."""
    fields = dataclasses.fields(response_cls)
    names = [f.name for f in fields]
    size = 0
    for f in fields[names.index(array) + 1:]:
        size += _FIXED_SIZES[f.metadata["kafka_type"]]
    return size + (1 if getattr(response_cls, "__flexible__", False) else 0)


def splice(api_key: int, version: int, correlation_id: int, empty: Any, array: str,
           entries: Iterable[bytes]) -> SplicedFrame:
    """The frame of `empty` (the response with `array` empty) with the encoded
    `entries` as that array, which only fixed-size fields may follow."""
    cls = type(empty)
    frame = encode_response(api_key, version, correlation_id, empty)
    flexible = bool(cls.__flexible__)
    at = len(frame) - _tail_size(cls, array) - (1 if flexible else 4)
    marker = b"\x01" if flexible else b"\0\0\0\0"
    if frame[at:at + len(marker)] != marker:  # the schema moved: a bug here, not input
        raise AssertionError(f"API {api_key} v{version}: no empty {array} array at {at}")
    body = entries if isinstance(entries, list) else list(entries)
    count = _varint(len(body) + 1) if flexible else _I32.pack(len(body))
    out = bytearray(frame[:at])
    out += count
    out += b"".join(body)
    out += frame[at + len(marker):]
    _I32.pack_into(out, 0, len(out) - 4)
    # throttle_time_ms, where a version has it, is the body's first field, after the
    # response header (correlation id, and tagged fields when flexible)
    has_throttle = dataclasses.fields(cls)[0].name == "throttle_time"
    throttle_at = (8 + (1 if flexible else 0)) if has_throttle else -1
    return SplicedFrame(bytes(out), throttle_at=throttle_at)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
