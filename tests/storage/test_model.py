"""Random appends, reads, rolls, truncations, flushes and reopens against a model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import BASE_TS, Clock, base_offsets, make_batch

from odradek.protocol.errors import OffsetOutOfRange
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig

CONFIG = LogConfig(segment_bytes=2500, index_interval_bytes=90, segment_index_bytes=120)


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp())
        self.clock = Clock()
        self.log = Log.open(self.root / "model-0", CONFIG, clock_ms=self.clock)
        self.batches: list[tuple[int, bytes]] = []  # (base offset, stored bytes)
        self.timestamps: list[int] = []  # per offset
        self.next_ts = BASE_TS

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close_without_flush()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def end(self) -> int:
        return len(self.timestamps)

    @rule(
        sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
        value_size=st.integers(0, 100),
        jitter=st.integers(-50, 100),
    )
    def append(self, sizes: list[int], value_size: int, jitter: int) -> None:
        buf = bytearray()
        spans = []
        for count in sizes:
            self.next_ts += jitter
            ts = [self.next_ts + j for j in range(count)]
            batch = make_batch([b"v" * value_size] * count, timestamps=ts)
            spans.append((len(buf), len(batch), count, ts))
            buf += batch
        info = self.log.append_as_leader(buf, leader_epoch=0)
        assert info.first_offset == self.end
        offset = self.end
        for pos, size, count, ts in spans:
            self.batches.append((offset, bytes(buf[pos : pos + size])))
            self.timestamps += ts
            offset += count
        assert info.last_offset == offset - 1

    @rule(data=st.data(), max_bytes=st.integers(1, 2000), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        offset = data.draw(st.integers(0, self.end))
        hw = data.draw(st.one_of(st.none(), st.integers(0, self.end)))
        got = self.log.read(offset, max_bytes, max_offset=hw, min_one_batch=min_one).records
        limit = self.end if hw is None else hw
        expected = b""
        if offset < limit:
            first = max(i for i, (base, _) in enumerate(self.batches) if base <= offset)
            for i, (_, raw) in enumerate(self.batches[first:]):
                following = first + i + 1
                next_base = (
                    self.batches[following][0] if following < len(self.batches) else self.end
                )
                # whole batches only, none reaching the limit, within max_bytes
                if next_base > limit or (
                    len(expected) + len(raw) > max_bytes and (expected or not min_one)
                ):
                    break
                expected += raw
        # A read stops at a segment's end, so it may return a prefix of this.
        assert expected.startswith(got)
        if expected:
            assert got, "at least the first batch"
        if got:
            assert len(got) <= max_bytes or len(base_offsets(got)) == 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.end

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.batches) - 1))
        base = self.batches[index][0]
        self.log.truncate_to(base)
        del self.batches[index:]
        del self.timestamps[base:]
        assert self.log.log_end_offset == base

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = Log.open(
            self.root / "model-0", CONFIG, clean_shutdown=True, clock_ms=self.clock
        )

    @rule()
    def crash_and_recover(self) -> None:
        point = self.log.recovery_point
        self.log.close_without_flush()
        self.log = Log.open(
            self.root / "model-0", CONFIG, recovery_point=point, clock_ms=self.clock
        )

    @rule(data=st.data())
    def timestamp_lookup(self, data: st.DataObject) -> None:
        low = min(self.timestamps, default=BASE_TS) - 100
        high = max(self.timestamps, default=BASE_TS) + 100
        target = data.draw(st.integers(low, high))
        found = self.log.offset_for_timestamp(target)
        matches = [o for o, ts in enumerate(self.timestamps) if ts >= target]
        if not matches:
            assert found is None
        else:
            assert found is not None
            assert (found.offset, found.timestamp) == (matches[0], self.timestamps[matches[0]])

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(bases) and len(set(bases)) == len(bases)
        try:
            self.log.read(self.end + 1, 10)
        except OffsetOutOfRange:
            pass
        else:
            raise AssertionError("read past the log end must fail")


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
