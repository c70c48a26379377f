"""A share-partition's state as the share coordinator keeps it: what `state_batches()`
writes, what `load()` makes of it, and every change that must be written counted."""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.share.partition import (
    AckBatch,
    AckType,
    Acquired,
    Limits,
    LogBatch,
    RecordState,
    SharePartition,
)

AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


class Locks:
    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, _delay_s: float, fn: Callable[[], None]) -> None:
        self.pending.append(fn)

    def expire_all(self) -> None:
        fired, self.pending = self.pending, []
        for fn in fired:
            fn()


def new(locks: Locks) -> SharePartition:
    return SharePartition("g", "t", 0, Limits(30_000, 5, 100), locks)


def test_the_state_written_holds_acquired_records_as_available_and_counts_changes() -> None:
    locks = Locks()
    sp = new(locks)
    sp.initialize(10)
    written = sp.changes
    got = sp.acquire("m", [LogBatch(10, 14), LogBatch(15, 15, is_control=True),
                           LogBatch(16, 17)], 100)
    assert got == [Acquired(10, 14, 1), Acquired(16, 17, 1)]
    assert sp.changes == written, "acquiring alone is not written"
    sp.acknowledge("m", [AckBatch(10, 11, (AckType.ACCEPT,)),
                         AckBatch(12, 12, (AckType.RELEASE,)),
                         AckBatch(13, 13, (AckType.REJECT,))])
    assert sp.changes == written + 1
    # 10-11 accepted: the start moves to 12
    assert sp.start_offset == 12
    assert sp.state_batches() == [(12, 12, AVAILABLE, 1), (13, 13, ARCHIVED, 1),
                                  (14, 14, AVAILABLE, 1), (15, 15, ARCHIVED, 0),
                                  (16, 17, AVAILABLE, 1)]
    locks.expire_all()  # the lock timeout releases 14, 16, 17: a change to write
    assert sp.changes == written + 2


def test_a_loaded_state_delivers_what_was_available_and_never_what_was_done() -> None:
    sp = new(Locks())
    # 20 acknowledged, 21 available once delivered, 22-23 never written (a gap: they
    # were held at a crash before any write), 24 archived, 25 available
    sp.load(20, [(20, 20, ACKED, 1), (21, 21, AVAILABLE, 1), (24, 24, ARCHIVED, 3),
                 (25, 25, AVAILABLE, 2)], state_epoch=4)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (21, 26, 4)
    assert sp.next_fetch_offset() == 21
    # the log no longer holds 23 (compacted): never delivered
    got = sp.acquire("m", [LogBatch(21, 22), LogBatch(24, 27)], 100)
    assert got == [Acquired(21, 21, 2), Acquired(22, 22, 1), Acquired(25, 25, 3),
                   Acquired(26, 27, 1)]
    assert sp.states()[23] == (RecordState.ARCHIVED, 0)
    assert sp.states()[24] == (RecordState.ARCHIVED, 3)


def test_a_state_claiming_more_than_the_lock_limit_in_flight_is_cut_there() -> None:
    sp = new(Locks())  # at most 100 records in flight
    sp.load(0, [(0, 2**60, AVAILABLE, 1)], state_epoch=0)
    assert (sp.start_offset, sp.end_offset, len(sp.records)) == (0, 100, 100)
