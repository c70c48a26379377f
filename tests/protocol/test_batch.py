import struct

import crc32c
import pytest

from odradek.protocol import batch
from odradek.protocol.errors import CorruptMessage


def _empty_batch(base_offset: int = 0, records: int = 1, last_delta: int = 0) -> bytearray:
    body = struct.pack(">hiqqqhii", 0, last_delta, 1000, 1000, -1, -1, -1, records)
    length = 4 + 1 + 4 + len(body)  # leader epoch, magic, crc, rest
    buf = bytearray(struct.pack(">qiibI", base_offset, length, 0, 2, 0) + body)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return buf


def test_header_round_trips_fields() -> None:
    buf = _empty_batch(base_offset=7, records=3, last_delta=2)
    header = batch.read_header(buf)
    assert header.base_offset == 7
    assert header.last_offset == 9
    assert header.next_offset == 10
    assert header.size == len(buf)
    assert header.compression is batch.Compression.NONE
    assert batch.crc_is_valid(buf, header)


def test_patching_base_offset_keeps_crc_valid() -> None:
    buf = _empty_batch()
    batch.set_base_offset(buf, 0, 123456)
    header = batch.read_header(buf)
    assert header.base_offset == 123456
    assert batch.crc_is_valid(buf, header)


def test_log_append_time_rewrites_crc() -> None:
    buf = _empty_batch()
    batch.set_log_append_time(buf, 0, len(buf), 5555)
    header = batch.read_header(buf)
    assert header.timestamp_type is batch.TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 5555
    assert batch.crc_is_valid(buf, header)


def test_iter_headers_stops_at_partial_tail() -> None:
    one = _empty_batch()
    data = one + _empty_batch(base_offset=1) + one[:30]
    positions = [pos for pos, _ in batch.iter_headers(data)]
    assert positions == [0, len(one)]


def test_wrong_magic_is_corrupt() -> None:
    buf = _empty_batch()
    buf[16] = 1
    with pytest.raises(CorruptMessage):
        batch.read_header(buf)
