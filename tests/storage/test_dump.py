"""dump-log's output for real segment files, compared line for line with Kafka's format."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import crc32c
import pytest

from odradek.protocol.batch import Compression, TimestampType
from odradek.protocol.records import NewRecord, encode_batch, encode_control_batch
from odradek.storage.dump import (
    Decoder,
    DumpError,
    DumpOptions,
    DumpProblems,
    FileSkipped,
    dump_file,
)
from odradek.storage.dump_decoders import to_json

SEGMENT = "00000000000000000000"


def crc(batch: bytes) -> int:
    return int(crc32c.crc32c(batch[21:]))


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def dump(path: Path, problems: DumpProblems | None = None, **options: object) -> list[str]:
    return list(dump_file(path, DumpOptions(**options), problems))  # type: ignore[arg-type]


def batch_line(
    base: int, last: int, position: int, batch: bytes, *, count: int = 1, timestamp: int = 0,
    codec: str = "none", leader_epoch: int = 0, producer: str = "-1 producerEpoch: -1",
    sequences: str = "-1 lastSequence: -1", transactional: bool = False, control: bool = False,
    ts_type: str = "CreateTime", horizon: str = "OptionalLong.empty",
) -> str:
    """The batch line as Kafka's printBatchLevel writes it."""
    flags = f"isTransactional: {str(transactional).lower()} isControl: {str(control).lower()}"
    return (
        f"baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {sequences} "
        f"producerId: {producer} partitionLeaderEpoch: {leader_epoch} {flags} "
        f"deleteHorizonMs: {horizon} position: {position} {ts_type}: {timestamp} "
        f"size: {len(batch)} magic: 2 compresscodec: {codec} crc: {crc(batch)} isvalid: true"
    )  # fmt: skip


def simple_batch(base: int, *values: bytes, timestamp: int = 1000, **kw: object) -> bytes:
    records = [NewRecord(value=v, timestamp=timestamp + i) for i, v in enumerate(values)]
    return encode_batch(records, base_offset=base, partition_leader_epoch=0, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- .log


def test_batch_line_is_kafkas_print_batch_level(tmp_path: Path) -> None:
    batch = simple_batch(0, b"message", timestamp=1634567)
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    assert dump(log) == [
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1634567 "
        f"size: 75 magic: 2 compresscodec: none crc: {crc(batch)} isvalid: true",
    ]


def test_print_data_log_shows_keys_payloads_and_header_keys(tmp_path: Path) -> None:
    first = simple_batch(0, b"message", timestamp=1634567)
    second = encode_batch(
        [
            NewRecord(key=b"k1", value=b"v1", headers=[("h1", b"x"), ("h2", None)], timestamp=10),
            NewRecord(key=b"k2", value=None, timestamp=12),
            NewRecord(key=None, value=b"", timestamp=11),
        ],
        base_offset=1,
        partition_leader_epoch=3,
    )
    log = write(tmp_path / f"{SEGMENT}.log", first + second)

    assert dump(log, print_data_log=True)[2:] == [
        batch_line(0, 0, 0, first, timestamp=1634567),
        "| offset: 0 CreateTime: 1634567 keySize: -1 valueSize: 7 sequence: -1 headerKeys: [] "
        "payload: message",
        batch_line(1, 3, len(first), second, count=3, timestamp=12, leader_epoch=3),
        "| offset: 1 CreateTime: 10 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h1,h2] "
        "key: k1 payload: v1",
        "| offset: 2 CreateTime: 12 keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k2",
        "| offset: 3 CreateTime: 11 keySize: -1 valueSize: 0 sequence: -1 headerKeys: [] payload: ",
    ]


def test_deep_iteration_prints_record_metadata_without_contents(tmp_path: Path) -> None:
    batch = simple_batch(0, b"a", b"b")
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    assert dump(log, deep_iteration=True)[3:] == [
        "| offset: 0 CreateTime: 1000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []",
        "| offset: 1 CreateTime: 1001 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []",
    ]


def test_skip_record_metadata_prints_contents_only(tmp_path: Path) -> None:
    data = encode_batch([NewRecord(key=b"k", value=b"v", timestamp=1), NewRecord(value=b"w")])
    marker = encode_control_batch(commit=True, producer_id=1, producer_epoch=0,
                                  coordinator_epoch=0, base_offset=2, timestamp=5)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", data + marker)

    lines = dump(log, print_data_log=True, skip_record_metadata=True)
    # Kafka still ends the (skipped) control record's line: an empty line.
    assert [lines[3], lines[4], lines[6]] == ["| key: k payload: v", "| payload: w", ""]


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_compressed_batches_name_their_codec_and_show_records(
    tmp_path: Path, codec: Compression
) -> None:
    batch = simple_batch(0, b"x" * 100, b"y", compression=codec)
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    lines = dump(log, print_data_log=True)
    assert lines[2] == batch_line(0, 1, 0, batch, count=2, timestamp=1001, codec=codec.name.lower())
    assert lines[3].endswith("payload: " + "x" * 100)
    assert lines[4].endswith("payload: y")


def test_idempotent_batch_shows_producer_and_sequences_wrapping_at_int32(tmp_path: Path) -> None:
    batch = encode_batch(
        [NewRecord(value=b"a", timestamp=1), NewRecord(value=b"b", timestamp=2)],
        producer_id=4000, producer_epoch=7, base_sequence=2**31 - 1, partition_leader_epoch=0,
    )  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    lines = dump(log, deep_iteration=True)
    assert lines[2] == batch_line(
        0, 1, 0, batch, count=2, timestamp=2, producer="4000 producerEpoch: 7",
        sequences="2147483647 lastSequence: 0",
    )  # fmt: skip
    assert "sequence: 2147483647 " in lines[3]
    assert "sequence: 0 " in lines[4]


def test_transaction_markers_show_type_and_coordinator_epoch(tmp_path: Path) -> None:
    data = encode_batch([NewRecord(value=b"t", timestamp=5)], producer_id=9, producer_epoch=2,
                        base_sequence=0, transactional=True, partition_leader_epoch=0)  # fmt: skip
    commit = encode_control_batch(commit=True, producer_id=9, producer_epoch=2,
                                  coordinator_epoch=4, base_offset=1, timestamp=6)  # fmt: skip
    abort = encode_control_batch(commit=False, producer_id=9, producer_epoch=2,
                                 coordinator_epoch=0, base_offset=2, timestamp=7)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", data + commit + abort)

    lines = dump(log, print_data_log=True)
    assert lines[4] == batch_line(
        1, 1, len(data), commit, timestamp=6, leader_epoch=-1, producer="9 producerEpoch: 2",
        transactional=True, control=True,
    )  # fmt: skip
    # Control records show their marker and never a payload, even with --print-data-log.
    assert lines[5] == (
        "| offset: 1 CreateTime: 6 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 4"
    )
    assert lines[7].endswith("endTxnMarker: ABORT coordinatorEpoch: 0")
    assert "isTransactional: true isControl: false" in lines[2]


def test_log_append_time_batches_give_every_record_the_batch_timestamp(tmp_path: Path) -> None:
    batch = encode_batch([NewRecord(value=b"a", timestamp=1), NewRecord(value=b"b", timestamp=2)],
                         timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777,
                         partition_leader_epoch=0)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    lines = dump(log, deep_iteration=True)
    assert lines[2] == batch_line(0, 1, 0, batch, count=2, timestamp=777, ts_type="LogAppendTime")
    assert lines[3].startswith("| offset: 0 LogAppendTime: 777 ")
    assert lines[4].startswith("| offset: 1 LogAppendTime: 777 ")


def test_cleaned_batch_shows_its_delete_horizon(tmp_path: Path) -> None:
    batch = encode_batch([NewRecord(key=b"k", value=None, timestamp=50)],
                         delete_horizon_ms=9999, partition_leader_epoch=0)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    assert "deleteHorizonMs: OptionalLong[9999] " in dump(log)[2]


def test_base_offset_comes_from_the_file_name(tmp_path: Path) -> None:
    log = write(tmp_path / "00000000000000000100.log", simple_batch(100, b"a", b"b"))
    problems = DumpProblems()

    lines = dump(log, problems, deep_iteration=True)
    assert lines[1] == "Log starting offset: 100"
    # Kafka starts every file at -1, so a segment past 0 always has this gap.
    assert list(problems.lines()) == [
        f"Non-consecutive offsets in {log.absolute()}",
        "  -1 is followed by 100",
    ]


def test_offset_gaps_are_reported_as_non_consecutive(tmp_path: Path) -> None:
    data = simple_batch(0, b"a") + simple_batch(5, b"b") + simple_batch(6, b"c")
    log = write(tmp_path / f"{SEGMENT}.log", data)
    problems = DumpProblems()

    dump(log, problems, deep_iteration=True)
    assert problems.non_consecutive == {str(log.absolute()): {0: 5}}
    assert not problems.index_problems


def test_partial_batch_at_the_end_is_reported_as_invalid_bytes(tmp_path: Path) -> None:
    first, second = simple_batch(0, b"a"), simple_batch(1, b"b")
    log = write(tmp_path / f"{SEGMENT}.log", first + second[:-5])

    lines = dump(log, print_data_log=True)
    assert lines[-2].endswith("payload: a")
    assert lines[-1] == f"Found {len(second) - 5} invalid bytes at the end of {SEGMENT}.log"


def test_a_tail_shorter_than_a_header_is_invalid_bytes_too(tmp_path: Path) -> None:
    log = write(tmp_path / f"{SEGMENT}.log", simple_batch(0, b"a") + b"\x00" * 17)

    assert dump(log)[-1] == f"Found 17 invalid bytes at the end of {SEGMENT}.log"


def test_bad_crc_in_the_middle_is_flagged_and_the_dump_goes_on(tmp_path: Path) -> None:
    first, second, third = simple_batch(0, b"aaaa"), simple_batch(1, b"bbbb"), simple_batch(2, b"c")
    corrupt = bytearray(second)
    corrupt[-3] ^= 0xFF  # inside the value: the record still parses
    log = write(tmp_path / f"{SEGMENT}.log", first + bytes(corrupt) + third)

    lines = dump(log, print_data_log=True)
    assert lines[4].endswith(f"crc: {crc(second)} isvalid: false")
    assert lines[5].startswith("| offset: 1 ")
    assert lines[6] == batch_line(2, 2, len(first) + len(second), third, timestamp=1000)
    assert not any(line.startswith("Found") for line in lines)


def test_a_size_below_the_minimum_stops_the_dump_with_kafkas_message(tmp_path: Path) -> None:
    first = simple_batch(0, b"a")
    garbage = struct.pack(">qi", 1, 3) + b"\x00" * 20
    log = write(tmp_path / f"{SEGMENT}.log", first + garbage)

    lines: list[str] = []
    with pytest.raises(DumpError) as excinfo:
        lines.extend(dump_file(log))
    assert lines[-1] == batch_line(0, 0, 0, first, timestamp=1000)
    assert str(excinfo.value) == (
        f"Found record size 3 smaller than minimum record overhead (14) in file {log}."
    )


def test_a_corrupt_length_in_the_middle_leaves_the_rest_as_invalid_bytes(tmp_path: Path) -> None:
    first, second = simple_batch(0, b"a"), bytearray(simple_batch(1, b"b"))
    second[8:12] = struct.pack(">i", 10_000)
    log = write(tmp_path / f"{SEGMENT}.log", first + bytes(second))

    assert dump(log)[-1] == f"Found {len(second)} invalid bytes at the end of {SEGMENT}.log"


def test_records_that_do_not_parse_stop_a_deep_dump(tmp_path: Path) -> None:
    batch = bytearray(simple_batch(0, b"a"))
    batch[57:61] = struct.pack(">i", 5)  # five records claimed, one there
    log = write(tmp_path / f"{SEGMENT}.log", bytes(batch))

    assert len(dump(log)) == 3  # shallow iteration does not read the records
    with pytest.raises(DumpError, match="position 0"):
        dump(log, deep_iteration=True)


def test_max_bytes_reads_whole_batches_within_the_limit(tmp_path: Path) -> None:
    batches = [simple_batch(i, b"v") for i in range(4)]
    log = write(tmp_path / f"{SEGMENT}.log", b"".join(batches))

    lines = dump(log, max_bytes=2 * len(batches[0]) + 10)
    # Two batches fit; the rest is not reported as invalid when a limit was asked for.
    assert [line.split(" ")[1] for line in lines[2:]] == ["0", "1"]


def test_empty_batch_left_by_the_cleaner_has_no_records(tmp_path: Path) -> None:
    from odradek.protocol.records import encode_empty_batch

    batch = encode_empty_batch(base_offset=0, last_offset_delta=2, max_timestamp=30,
                               producer_id=5, producer_epoch=0, base_sequence=0)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    lines = dump(log, print_data_log=True)
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 2 count: 0 baseSequence: 0 lastSequence: 2 "
    )
    assert len(lines) == 3


# ---------------------------------------------------------------------------- legacy


def legacy_message(magic: int, key: bytes | None, value: bytes | None,
                   timestamp: int = -1, attributes: int = 0) -> bytes:  # fmt: skip
    def field(data: bytes | None) -> bytes:
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data

    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += field(key) + field(value)
    return struct.pack(">I", zlib.crc32(body)) + body


def legacy_entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def test_legacy_messages_use_kafkas_legacy_lines(tmp_path: Path) -> None:
    v0 = legacy_message(0, b"k", b"v0")
    v1 = legacy_message(1, None, b"v1", timestamp=123)
    log = write(tmp_path / f"{SEGMENT}.log", legacy_entry(0, v0) + legacy_entry(1, v1))
    crc0, crc1 = struct.unpack_from(">I", v0)[0], struct.unpack_from(">I", v1)[0]

    assert dump(log, print_data_log=True)[2:] == [
        f"offset: 0 position: 0 NoTimestampType: -1 size: {len(v0) + 12} magic: 0 "
        f"compresscodec: none crc: {crc0} isvalid: true",
        f"| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 2 isValid: true crc: {crc0} "
        "key: k payload: v0",
        f"offset: 1 position: {len(v0) + 12} CreateTime: 123 size: {len(v1) + 12} magic: 1 "
        f"compresscodec: none crc: {crc1} isvalid: true",
        f"| offset: 1 CreateTime: 123 keySize: -1 valueSize: 2 isValid: true crc: {crc1} "
        "payload: v1",
    ]


def test_legacy_compressed_wrapper_shows_inner_messages_at_absolute_offsets(
    tmp_path: Path,
) -> None:
    inner = b"".join(
        legacy_entry(i, legacy_message(1, None, f"m{i}".encode(), timestamp=10 + i))
        for i in range(3)
    )
    wrapper = legacy_message(1, None, gzip.compress(inner), timestamp=12, attributes=1)
    log = write(tmp_path / "00000000000000000040.log", legacy_entry(42, wrapper))

    lines = dump(log, print_data_log=True)
    assert lines[2].startswith("offset: 42 position: 0 CreateTime: 12 ")
    assert "compresscodec: gzip" in lines[2]
    assert [line.split(" ")[2] for line in lines[3:]] == ["40", "41", "42"]
    assert lines[3].startswith("| offset: 40 CreateTime: 10 keySize: -1 valueSize: 2 isValid: true")
    assert lines[5].endswith("payload: m2")


# ---------------------------------------------------------------------------- indexes


def three_batch_segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    batches = [simple_batch(0, b"a", b"b", timestamp=100), simple_batch(2, b"c", timestamp=200),
               simple_batch(3, b"d", b"e", timestamp=300)]  # fmt: skip
    write(tmp_path / f"{SEGMENT}.log", b"".join(batches))
    return tmp_path / f"{SEGMENT}.log", batches


def offset_index(*entries: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def time_index(*entries: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


def test_offset_index_lines(tmp_path: Path) -> None:
    _, batches = three_batch_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index",
                  offset_index((1, 0), (2, len(batches[0]))))  # fmt: skip
    problems = DumpProblems()

    assert dump(index, problems) == [
        f"Dumping {index}",
        "offset: 1 position: 0",
        f"offset: 2 position: {len(batches[0])}",
    ]
    assert not problems.index_problems


def test_index_entries_not_at_a_batch_end_are_mismatches(tmp_path: Path) -> None:
    _, batches = three_batch_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index",
                  offset_index((0, 0), (3, len(batches[0]) + len(batches[1]))))  # fmt: skip
    problems = DumpProblems()

    assert dump(index, problems, verify_index_only=True) == [f"Dumping {index}"]
    assert list(problems.lines()) == [
        f"Mismatches in :{index.absolute()}",
        "  Index offset: 3, log offset: 4",
        "  Index offset: 0, log offset: 1",
    ]


def test_index_dump_stops_at_a_zero_entry_as_after_a_crash(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (0, 0), (0, 0)))

    assert dump(index) == [f"Dumping {index}", "offset: 1 position: 0"]


def test_empty_index(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", b"\x00" * 7)

    assert dump(index) == [f"Dumping {index}", f"{index} is empty."]


def test_index_sanity_check(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    good = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0), (2, 50)))
    assert dump(good, index_sanity_check=True)[1] == f"{good} passed sanity check."

    write(good, offset_index((1, 0)) + b"\x00\x00")
    with pytest.raises(DumpError, match=r"is corrupt, found 10 bytes which is neither positive "
                                        r"nor a multiple of 8"):  # fmt: skip
        dump(good, index_sanity_check=True)

    write(good, offset_index((1, 0), (-5, 0)))
    with pytest.raises(DumpError, match="last offset is -5 which is less than the base offset 0"):
        dump(good, index_sanity_check=True)


def test_an_index_entry_past_the_log_end_is_an_error(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    index = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 10_000)))

    with pytest.raises(DumpError, match="Slice from position 10000 exceeds end position"):
        dump(index)


def test_an_index_needs_its_log(tmp_path: Path) -> None:
    index = write(tmp_path / f"{SEGMENT}.index", offset_index((1, 0)))

    with pytest.raises(DumpError, match=r"00000000000000000000\.log: No such file"):
        dump(index)


def test_time_index_lines_and_a_clean_verification(tmp_path: Path) -> None:
    _, batches = three_batch_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", offset_index((2, len(batches[0]))))
    tindex = write(tmp_path / f"{SEGMENT}.timeindex", time_index((101, 1), (200, 2), (301, 4)))
    problems = DumpProblems()

    assert dump(tindex, problems) == [
        f"Dumping {tindex}",
        "timestamp: 101 offset: 1",
        "timestamp: 200 offset: 2",
        "timestamp: 301 offset: 4",
    ]
    assert not problems.index_problems


def test_time_index_verification_reports_kafkas_three_problems(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", b"")
    tindex = write(tmp_path / f"{SEGMENT}.timeindex",
                   time_index((150, 1), (140, 2), (400, 3), (500, 9)))  # fmt: skip
    problems = DumpProblems()

    assert dump(tindex, problems, verify_index_only=True) == [f"Dumping {tindex}"]
    name = tindex.absolute()
    assert list(problems.lines()) == [
        f"Found timestamp mismatch in :{name}",
        "  Index timestamp: 150, log timestamp: 101",
        "  Index timestamp: 140, log timestamp: 200",
        f"Found out of order timestamp in :{name}",
        "  Index timestamp: 140, Previously indexed timestamp: 150",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 3, found log offset: 4",
        "Indexed offset: 9, found log offset: -1",
    ]


def test_time_index_sanity_check(tmp_path: Path) -> None:
    three_batch_segment(tmp_path)
    write(tmp_path / f"{SEGMENT}.index", b"")
    tindex = write(tmp_path / f"{SEGMENT}.timeindex", time_index((300, 4), (200, 2)))

    with pytest.raises(DumpError, match="last timestamp is 200 which is less than the first "
                                        "timestamp 300"):  # fmt: skip
        dump(tindex, index_sanity_check=True)
    write(tindex, time_index((200, 2), (300, 4)))
    assert dump(tindex, index_sanity_check=True)[1] == f"{tindex} passed sanity check."


def test_transaction_index_lines(tmp_path: Path) -> None:
    entries = [struct.pack(">hqqqq", 0, 7, 10, 20, 15), struct.pack(">hqqqq", 0, 8, 30, 31, 40)]
    txn = write(tmp_path / f"{SEGMENT}.txnindex", b"".join(entries) + b"\x00" * 5)

    assert dump(txn)[1:] == [
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 20 lastStableOffset: 15",
        "version: 0 producerId: 8 firstOffset: 30 lastOffset: 31 lastStableOffset: 40",
    ]


# ---------------------------------------------------------------------------- state files


def producer_snapshot(*entries: tuple[int, int, int, int, int, int, int, int]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshot_lines(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "00000000000000000042.snapshot", producer_snapshot(
        (1000, 3, 9, 41, 4, 555, 2, 38),  # open transaction from 38; batch of sequences 5..9
        (1001, 0, -1, -1, 0, 777, -1, -1),  # no batch kept
    ))  # fmt: skip

    assert dump(snapshot)[1:] == [
        "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 2 currentTxnFirstOffset: "
        "OptionalLong[38] lastTimestamp: 555 firstSequence: 5 lastSequence: 9 lastOffset: 41 "
        "offsetDelta: 4 timestamp: 555",
        "producerId: 1001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 777",
    ]


def test_corrupt_producer_snapshots_are_skipped_with_kafkas_messages(tmp_path: Path) -> None:
    data = bytearray(producer_snapshot((1, 0, 0, 0, 0, 0, -1, -1)))
    snapshot = tmp_path / f"{SEGMENT}.snapshot"
    data[-1] ^= 1
    write(snapshot, bytes(data))
    with pytest.raises(FileSkipped, match=r"Snapshot is corrupt \(CRC is no longer valid\)\. "
                                          r"Stored crc: \d+\. Computed crc: \d+"):  # fmt: skip
        dump(snapshot)

    write(snapshot, struct.pack(">h", 2) + bytes(data[2:]))
    with pytest.raises(FileSkipped, match="unknown file version 2"):
        dump(snapshot)


def test_checkpoint_files_are_printed_entry_by_entry(tmp_path: Path) -> None:
    epochs = write(tmp_path / "leader-epoch-checkpoint", b"0\n2\n0 0\n3 120\n")
    offsets = write(tmp_path / "recovery-point-offset-checkpoint", b"0\n1\nmy-topic 4 99\n")

    assert dump(epochs)[1:] == ["epoch: 0 startOffset: 0", "epoch: 3 startOffset: 120"]
    assert dump(offsets)[1:] == ["topic: my-topic partition: 4 offset: 99"]


def test_malformed_checkpoints_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write(path, b"0\n3\n0 0\n")
    with pytest.raises(DumpError, match=r"Expected \[3\] entries .* but found only \[1\]"):
        dump(path)
    write(path, b"0\n1\n0 zero\n")
    with pytest.raises(DumpError, match=r"Malformed line in checkpoint file .*: 0 zero"):
        dump(path)


# ---------------------------------------------------------------------------- files


def test_unknown_files_are_skipped(tmp_path: Path) -> None:
    other = write(tmp_path / f"{SEGMENT}.log.deleted", b"")
    lines: list[str] = []

    with pytest.raises(FileSkipped, match=f"Ignoring unknown file {other}"):
        lines.extend(dump_file(other))
    assert lines == [f"Dumping {other}"]


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DumpError, match="No such file or directory"):
        dump(tmp_path / f"{SEGMENT}.log")


def test_a_segment_name_that_is_not_a_number_is_an_error(tmp_path: Path) -> None:
    log = write(tmp_path / "segment.log", b"")

    with pytest.raises(DumpError, match='For input string: "segment"'):
        dump(log)


def test_kraft_snapshot_names_its_end_offset_and_epoch(tmp_path: Path) -> None:
    snapshot = write(tmp_path / "00000000000000000100-0000000003.checkpoint", b"")

    assert dump(snapshot)[1] == "Snapshot end offset: 100, epoch: 3"


def test_kraft_control_records_are_shown_as_kafkas_json(tmp_path: Path) -> None:
    # LeaderChangeMessage v0: version, leaderId, voters, grantingVoters (flexible).
    value = (struct.pack(">hi", 0, 1) + b"\x02" + struct.pack(">i", 1) + b"\x00"
             + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x00")  # fmt: skip
    batch = encode_batch([NewRecord(key=struct.pack(">hh", 0, 2), value=value, timestamp=3)],
                         control=True, partition_leader_epoch=1)  # fmt: skip
    log = write(tmp_path / f"{SEGMENT}.log", batch)

    assert dump(log, deep_iteration=True)[3].endswith(
        ' LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],'
        '"grantingVoters":[{"voterId":1}]}'
    )


# ---------------------------------------------------------------------------- decoders


def kstr(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def cstr(text: str | None) -> bytes:
    """A compact (flexible-version) string."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


def coordinator_log(tmp_path: Path, *pairs: tuple[bytes | None, bytes | None]) -> Path:
    records = [NewRecord(key=k, value=v, timestamp=1) for k, v in pairs]
    return write(tmp_path / f"{SEGMENT}.log", encode_batch(records, partition_leader_epoch=0))


def payloads(log: Path, decoder: Decoder) -> list[str]:
    lines = dump(log, decoder=decoder)
    return [line.split("headerKeys: [] ", 1)[1] for line in lines if line.startswith("|")]


def test_offsets_decoder_shows_offset_commits(tmp_path: Path) -> None:
    key = struct.pack(">h", 1) + kstr("my-group") + kstr("orders") + struct.pack(">i", 3)
    v3 = struct.pack(">hqi", 3, 42, 7) + kstr("meta") + struct.pack(">q", 1700000000000)
    v1 = struct.pack(">hq", 1, 5) + kstr("") + struct.pack(">qq", 10, 20)
    log = coordinator_log(tmp_path, (key, v3), (key, v1), (key, None))

    group_key = '{"type":"1","data":{"group":"my-group","topic":"orders","partition":3}}'
    assert payloads(log, Decoder.OFFSETS) == [
        f'key: {group_key} payload: {{"version":"3","data":{{"offset":42,"leaderEpoch":7,'
        '"metadata":"meta","commitTimestamp":1700000000000}}',
        f'key: {group_key} payload: {{"version":"1","data":{{"offset":5,"metadata":"",'
        '"commitTimestamp":10,"expireTimestamp":20}}',
        f"key: {group_key} payload: <DELETE>",
    ]


def group_metadata_v4(subscription: bytes, assignment: bytes) -> bytes:
    member = (cstr("member") + cstr("instance") + cstr("client") + cstr("host")
              + struct.pack(">ii", 1000, 100)
              + bytes([len(subscription) + 1]) + subscription
              + bytes([len(assignment) + 1]) + assignment + b"\x00")  # fmt: skip
    return (struct.pack(">h", 4) + cstr("consumer") + struct.pack(">i", 10) + cstr("range")
            + cstr("member") + struct.pack(">q", -1) + b"\x02" + member + b"\x00")  # fmt: skip


def test_offsets_decoder_expands_the_consumer_protocol_as_kafkas_test_expects(
    tmp_path: Path,
) -> None:
    # The subscription and assignment Java's ConsumerProtocol writes (version 3) for
    # topic foo, partition 0, generation 0, rack "rack": Kafka's DumpLogSegmentsTest.
    subscription = (struct.pack(">hi", 3, 1) + kstr("foo") + struct.pack(">i", -1)
                    + struct.pack(">i", 1) + kstr("foo") + struct.pack(">ii", 1, 0)
                    + struct.pack(">i", 0) + kstr("rack"))  # fmt: skip
    assignment = (struct.pack(">hi", 3, 1) + kstr("foo") + struct.pack(">ii", 1, 0)
                  + struct.pack(">i", -1))  # fmt: skip
    key = struct.pack(">h", 2) + kstr("group")
    log = coordinator_log(
        tmp_path,
        (key, group_metadata_v4(subscription, assignment)),
        (key, group_metadata_v4(b"Subscription", b"Assignment")),
    )

    member = ('"memberId":"member","groupInstanceId":"instance","clientId":"client",'
              '"clientHost":"host","rebalanceTimeout":1000,"sessionTimeout":100')  # fmt: skip
    prefix = ('key: {"type":"2","data":{"group":"group"}} payload: {"version":"4","data":'
              '{"protocolType":"consumer","generation":10,"protocol":"range","leader":"member",'
              '"currentStateTimestamp":-1,"members":[{' + member)  # fmt: skip
    assert payloads(log, Decoder.OFFSETS) == [
        prefix + ',"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"generationId":0,"rackId":"rack"},'
        '"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"userData":null}}]}}',
        prefix + ',"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}',
    ]


def test_offsets_decoder_reports_records_it_cannot_read(tmp_path: Path) -> None:
    unknown = struct.pack(">h", 32767) + kstr("group")
    key = struct.pack(">h", 1) + kstr("g") + kstr("t") + struct.pack(">i", 0)
    log = coordinator_log(tmp_path, (unknown, b"\x00\x00"), (key, struct.pack(">hh", 3, 0)))

    assert payloads(log, Decoder.OFFSETS) == [
        "key: Unknown record type 32767 at offset 0, skipping.",
        "key: Error at offset 1, skipping. Could not read record with version 3 from value's "
        "buffer due to: Error reading 8 byte(s): only 2 byte(s) available.",
    ]


def test_offsets_decoder_stops_at_a_record_without_key(tmp_path: Path) -> None:
    log = coordinator_log(tmp_path, (None, b"x"))

    missing_key = r"at offset 0 using the specified decoder \(message had a missing key\)"
    with pytest.raises(DumpError, match=missing_key):
        dump(log, decoder=Decoder.OFFSETS)


def test_transaction_log_decoder(tmp_path: Path) -> None:
    key = struct.pack(">h", 0) + kstr("txn-1")
    # v1 (flexible): producerId, producerEpoch, timeout, status, partitions, two
    # timestamps, then tagged fields: previousProducerId (0) and clientTransactionVersion (2).
    v1 = (struct.pack(">hqhib", 1, 4000, 2, 60000, 1) + b"\x02" + cstr("orders")
          + b"\x03" + struct.pack(">ii", 0, 1) + b"\x00" + struct.pack(">qq", 1234, 1200)
          + b"\x02" + b"\x00\x08" + struct.pack(">q", 3999) + b"\x02\x02" + struct.pack(">h", 2)
          + b"\x00")  # fmt: skip
    v0 = struct.pack(">hqhib", 0, 5, 0, 100, 0) + struct.pack(">i", -1) + struct.pack(">qq", 1, -1)
    log = coordinator_log(tmp_path, (key, v1), (key, v0), (key, None))

    txn_key = '{"type":"0","data":{"transactionalId":"txn-1"}}'
    assert payloads(log, Decoder.TRANSACTION_LOG) == [
        f'key: {txn_key} payload: {{"version":"1","data":{{"producerId":4000,'
        '"previousProducerId":3999,"producerEpoch":2,"transactionTimeoutMs":60000,'
        '"transactionStatus":1,"transactionPartitions":[{"topic":"orders","partitionIds":[0,1]}],'
        '"transactionLastUpdateTimestampMs":1234,"transactionStartTimestampMs":1200,'
        '"clientTransactionVersion":2}}',
        f'key: {txn_key} payload: {{"version":"0","data":{{"producerId":5,"producerEpoch":0,'
        '"transactionTimeoutMs":100,"transactionStatus":0,"transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":1,"transactionStartTimestampMs":-1}}',
        f"key: {txn_key} payload: <DELETE>",
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("a\"b\\c", '"a\\"b\\\\c"'),
        ("\n\t\r\b\f", '"\\n\\t\\r\\b\\f"'),
        ("\x00\x1f", '"\\u0000\\u001F"'),  # Jackson writes upper-case hex
        ("é✓", '"é✓"'),
        (b"\x00\xff", '"AP8="'),
    ],
)
def test_json_is_written_as_jackson_writes_it(value: object, text: str) -> None:
    assert to_json(value) == text


def test_json_of_containers() -> None:
    assert to_json({"a": [1, None, True], "b": {}}) == '{"a":[1,null,true],"b":{}}'

