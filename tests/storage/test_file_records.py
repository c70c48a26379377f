"""A fetch's records as slices of segment files (FileRecords): the same bytes as a
read, at every response version, across segments, compacted and transactional logs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import pytest
from storage_helpers import make_batch

from odradek.protocol.fetch_response import (
    FetchedPartition,
    ResponseParts,
    encode_fetch_parts,
    encode_fetch_response,
)
from odradek.storage.file_records import FileRecords
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig


def _materialize(frame: bytearray | ResponseParts) -> bytes:
    if isinstance(frame, bytearray):
        return bytes(frame)
    return b"".join(p.read() if isinstance(p, FileRecords) else bytes(p) for p in frame.parts)


def _filled(open_log: Callable[..., Log]) -> Log:
    log = open_log(LogConfig(segment_bytes=4096))  # many segments
    for i in range(60):
        log.append_as_leader(make_batch([b"v%d" % i * 40] * (1 + i % 4)), leader_epoch=0)
    for i in range(5):  # a transaction aborted and one committed
        log.append_as_leader(make_batch([b"t"], producer_id=7, producer_epoch=0,
                                        base_sequence=i, transactional=True), leader_epoch=0)
        log.append_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0,
                          commit=i % 2 == 0, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    return log


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12, 13, 16, 17])
def test_a_fetch_sent_from_the_files_is_the_bytes_a_read_gives(
        open_log: Callable[..., Log], version: int) -> None:
    log = _filled(open_log)
    assert len(log.segments) > 5
    key: str | uuid.UUID = uuid.uuid4() if version >= 13 else "topic"
    for offset in range(0, log.log_end_offset, 7):
        for max_bytes in (1, 300, 5000, 1 << 20):
            read = log.read(offset, max_bytes)
            sliced = log.read(offset, max_bytes, file_records=True)
            assert len(sliced.records) == len(read.records)
            assert (sliced.first_offset, sliced.log_end_offset) == (
                read.first_offset, read.log_end_offset)
            aborted = log.collect_aborted_transactions(offset, read.records)
            assert log.collect_aborted_transactions(offset, sliced.records) == aborted

            def frame(records: bytes | FileRecords) -> bytearray | ResponseParts:
                return encode_fetch_parts(version, 5, [(key, [FetchedPartition(
                    0, 0, log.high_watermark, log.last_stable_offset, 0, records,
                    aborted, -1), FetchedPartition(1, 0, 3, 3, 0, b"")])])  # noqa: B023

            expected = encode_fetch_response(version, 5, [(key, [FetchedPartition(
                0, 0, log.high_watermark, log.last_stable_offset, 0, read.records,
                aborted, -1), FetchedPartition(1, 0, 3, 3, 0, b"")])])
            sent = frame(sliced.records)
            assert len(sent) == len(expected)
            assert _materialize(sent) == bytes(expected)


def test_a_slice_stays_readable_after_its_segment_is_deleted(
        open_log: Callable[..., Log]) -> None:
    log = _filled(open_log)
    sliced = log.read(0, 1 << 20, file_records=True).records
    assert isinstance(sliced, FileRecords)
    expected = log.read(0, 1 << 20).records
    fd = sliced.open()  # the sender holds its own descriptor while it sends
    try:
        log.increment_log_start_offset(log.segments[1].base_offset)
        log.delete_oldest_segments(1, "test")
        log.purge_deleted_segments(now_ms=1 << 62)
        assert not sliced.file.path.exists()
        assert os.pread(fd, sliced.size, sliced.position) == expected
    finally:
        os.close(fd)


def test_a_slice_cut_short_by_a_truncation_says_so(open_log: Callable[..., Log]) -> None:
    log = _filled(open_log)
    sliced = log.read(log.segments[-1].base_offset, 1 << 20, file_records=True).records
    assert isinstance(sliced, FileRecords)
    log.truncate_to(log.segments[-1].base_offset + 1)
    with pytest.raises(EOFError, match="cut short"):
        sliced.read()
