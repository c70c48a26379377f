"""One share-partition's records as a state machine (coordinator/share/partition.py):
acquisition, acknowledgement, lock timeouts and the delivery-count limit, with the
lock timers in the test's hand."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.coordinator.share.partition import (
    AckBatch,
    AckType,
    Acquired,
    Limits,
    LogBatch,
    RecordState,
    SharePartition,
    validate_ack_batches,
)
from odradek.coordinator.share.sessions import ShareSessionCache
from odradek.protocol.errors import ErrorCode, KafkaError

A, R, X = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT


class Locks:
    """The lock timers, fired when the test says so."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, _delay_s: float, fn: Callable[[], None]) -> None:
        self.pending.append(fn)

    def expire_all(self) -> None:
        fired, self.pending = self.pending, []
        for fn in fired:
            fn()


def partition(locks: Locks, limit: int = 5, max_locks: int = 100) -> SharePartition:
    sp = SharePartition("g", "t", 0, Limits(30_000, limit, max_locks), locks)
    sp.initialize(0)
    return sp


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int) -> None:
    sp.acknowledge(member, [AckBatch(first, last, tuple(types))])


def test_acquire_ranges_and_the_start_offset_moves_past_done_records() -> None:
    sp = partition(Locks())
    got = sp.acquire("m1", [LogBatch(0, 4), LogBatch(5, 9)], max_records=7)
    assert got == [Acquired(0, 6, 1)]
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 7, 7)
    ack(sp, "m1", 0, 2, A)
    assert sp.start_offset == 3
    ack(sp, "m1", 3, 6, X, A, A, A)
    assert (sp.start_offset, sp.records) == (7, {})


def test_a_release_makes_a_record_the_next_to_acquire_with_its_count() -> None:
    sp = partition(Locks())
    sp.acquire("m1", [LogBatch(0, 2)], 10)
    ack(sp, "m1", 0, 2, R, A, A)
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("m2", [LogBatch(0, 2), LogBatch(3, 3)], 10) == \
        [Acquired(0, 0, 2), Acquired(3, 3, 1)]


def test_lock_timeout_releases_and_the_limit_archives() -> None:
    locks = Locks()
    sp = partition(locks, limit=2)
    sp.acquire("m1", [LogBatch(0, 0)], 10)
    locks.expire_all()
    assert sp.states() == {0: (RecordState.AVAILABLE, 1)}
    assert sp.acquire("m2", [LogBatch(0, 0)], 10) == [Acquired(0, 0, 2)]
    locks.expire_all()  # the second delivery's lock: the limit is reached
    assert sp.states() == {} and sp.start_offset == 1
    # a stale lock of an earlier acquisition does nothing to a re-acquired record
    sp.acquire("m1", [LogBatch(1, 1)], 10)
    ack(sp, "m1", 1, 1, R)
    sp.acquire("m2", [LogBatch(1, 1)], 10)
    locks.pending[0]()  # the first acquisition's lock
    assert sp.states() == {1: (RecordState.ACQUIRED, 2)}


def test_acknowledgements_are_all_or_nothing_and_only_by_the_holder() -> None:
    sp = partition(Locks())
    sp.acquire("m1", [LogBatch(0, 3)], 10)
    with pytest.raises(KafkaError) as e:
        sp.acknowledge("m1", [AckBatch(0, 1, (A,)), AckBatch(2, 9, (A,))])
    assert e.value.code == ErrorCode.invalid_record_state
    assert all(s == RecordState.ACQUIRED for s, _ in sp.states().values())
    with pytest.raises(KafkaError):
        ack(sp, "m2", 0, 0, A)
    ack(sp, "m1", 0, 3, A)
    with pytest.raises(KafkaError):
        ack(sp, "m1", 0, 0, A)  # not twice


def test_the_record_lock_limit_bounds_what_is_in_flight() -> None:
    sp = partition(Locks(), max_locks=3)
    assert sp.acquire("m1", [LogBatch(0, 9)], 10) == [Acquired(0, 2, 1)]
    ack(sp, "m1", 0, 0, A)
    assert sp.acquire("m1", [LogBatch(0, 9)], 10) == [Acquired(3, 3, 1)]


def test_control_batches_and_gaps_are_never_delivered() -> None:
    sp = partition(Locks())
    got = sp.acquire("m1", [LogBatch(0, 1), LogBatch(2, 2, is_control=True),
                            LogBatch(5, 6)], 10)
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    ack(sp, "m1", 0, 1, A)
    assert sp.start_offset == 5  # the marker and the missing 3-4 are done


@pytest.mark.parametrize("batches", [
    [AckBatch(0, 0, (7,))],
    [AckBatch(0, 2, (A,)), AckBatch(2, 3, (A,))],
    [AckBatch(3, 2, (A,))],
    [AckBatch(0, 2, (A, A))],
])
def test_malformed_acknowledgements(batches: list[AckBatch]) -> None:
    with pytest.raises(KafkaError) as e:
        validate_ack_batches(batches)
    assert e.value.code == ErrorCode.invalid_request


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=1)
    s = cache.for_fetch("g", "m", 0, [], [], has_acks=False)
    assert s.epoch == 1
    assert cache.for_fetch("g", "m", 1, [], [], has_acks=True).epoch == 2
    for epoch, code in ((1, ErrorCode.invalid_share_session_epoch),
                        (0, ErrorCode.invalid_share_session_epoch)):
        with pytest.raises(KafkaError) as e:
            cache.for_acknowledge("g", "m", epoch)
        assert e.value.code == code
    with pytest.raises(KafkaError) as e:
        cache.for_fetch("g", "other", 0, [], [], has_acks=False)
    assert e.value.code == ErrorCode.share_session_limit_reached
    cache.remove("g", "m")
    with pytest.raises(KafkaError) as e:
        cache.for_fetch("g", "m", 2, [], [], has_acks=False)
    assert e.value.code == ErrorCode.share_session_not_found
