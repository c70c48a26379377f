"""ProduceRequest decoding by hand, for the hot path.

kio decodes records into a new `bytes` object, and the log then needs a writable copy to
patch offsets into. Here each partition's records stay a writable `memoryview` into the
request frame the socket filled, so a produce is copied once: from the kernel into the
frame. Same attribute names as kio's classes, so the handler reads either.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from kio.serial.readers import read_unsigned_varint

from odradek.protocol.errors import InvalidRequest

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
FIRST_FLEXIBLE_VERSION = 9


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):
    name: str
    partition_data: list[PartitionProduceData]


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


class _Reader:
    __slots__ = ("buf", "end", "flexible", "pos", "ro")

    def __init__(self, buf: bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.buf = memoryview(buf)
        self.ro = self.buf.toreadonly()  # kio's varint reader wants read-only buffers
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise InvalidRequest("produce request truncated")

    def int16(self) -> int:
        self._need(2)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        self._need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def uvarint(self) -> int:
        if self.pos >= self.end:
            raise InvalidRequest("produce request truncated")
        try:
            value, n = read_unsigned_varint(self.ro, self.pos)
        except Exception as e:
            raise InvalidRequest(f"bad varint in produce request: {e}") from e
        self.pos += n
        return int(value)

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if nullable:
                return None
            raise InvalidRequest("null string where one is required")
        self._need(n)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequest("string is not UTF-8") from e

    def records(self) -> memoryview | None:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            return None
        self._need(n)
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise InvalidRequest("null array in produce request")
        # every element takes at least one byte: a cheap bound against absurd counts
        if n > self.end - self.pos:
            raise InvalidRequest("produce request array longer than the request")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self._need(size)
            self.pos += size


def decode_produce_request(frame: bytearray | memoryview, offset: int,
                           version: int) -> ProduceRequest:
    """Decode versions 3-12 from `frame[offset:]` (the body after the request header)."""
    if not 3 <= version <= 12:
        raise InvalidRequest(f"produce v{version} is not decoded here")
    r = _Reader(frame, offset, version >= FIRST_FLEXIBLE_VERSION)
    transactional_id = r.string(nullable=True)
    acks = r.int16()
    timeout_ms = r.int32()
    topics = []
    for _ in range(r.array_length()):
        name = r.string()
        assert name is not None
        partitions = []
        for _ in range(r.array_length()):
            index = r.int32()
            records = r.records()
            r.skip_tags()
            partitions.append(PartitionProduceData(index, records))
        r.skip_tags()
        topics.append(TopicProduceData(name, partitions))
    r.skip_tags()
    if r.pos != r.end:
        raise InvalidRequest(f"{r.end - r.pos} bytes left over after the produce request")
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)
