"""The cleaner's offset map: key → offset of the key's last record in the dirty section.

Kafka's SkimpyOffsetMap keeps a 16-byte MD5 of each key and an 8-byte offset in a
preallocated buffer of `log.cleaner.dedupe.buffer.size` bytes (shared by the cleaner
threads) and stops mapping when 90% full. Here the keys themselves go into a dict —
no hash collisions, and CPython hashes a bytes key once — and the same budget is
enforced on an estimate of what the dict really holds (about 117 bytes of overhead per
entry plus the key, measured with tracemalloc on CPython 3.11).

The map is only checked for room between batches, so one batch always fits: a batch
with more keys than the budget still lets the cleaner make progress.
"""

from __future__ import annotations

ENTRY_OVERHEAD = 117  # dict slot, bytes object header, int


class OffsetMap:
    __slots__ = ("_map", "capacity_bytes", "latest_offset", "used_bytes")

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"offset map needs a positive size, not {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._map: dict[bytes, int] = {}
        self.used_bytes = 0
        self.latest_offset = -1  # the last offset the map covers; later records are kept

    def __len__(self) -> int:
        return len(self._map)

    def put(self, key: bytes, offset: int) -> None:
        if key not in self._map:
            self.used_bytes += ENTRY_OVERHEAD + len(key)
        self._map[key] = offset

    def put_all(self, records: list[tuple[int, bytes | None, bool]], start: int) -> None:
        """Map every keyed record at or after `start` (one batch's, in offset order)."""
        m = self._map
        used = 0
        for offset, key, _ in records:
            if key is not None and offset >= start:
                if key not in m:
                    used += ENTRY_OVERHEAD + len(key)
                m[key] = offset
        self.used_bytes += used

    def get(self, key: bytes) -> int:
        """The offset of the key's last record, or -1 when the dirty section lacks it."""
        return self._map.get(key, -1)

    @property
    def full(self) -> bool:
        return self.used_bytes >= self.capacity_bytes

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    @property
    def utilization(self) -> float:
        return self.used_bytes / self.capacity_bytes

    def clear(self) -> None:
        self._map.clear()
        self.used_bytes = 0
        self.latest_offset = -1
