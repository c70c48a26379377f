"""Kafka's DumpLogSegments, as pure functions: a file in, the tool's output lines out.

`dump_file(path, options, problems)` yields the stdout lines of Kafka's
`kafka-run-class kafka.tools.DumpLogSegments` for one file, chosen by its suffix:
`.log` (and KRaft `.checkpoint` snapshots), `.index`, `.timeindex`, `.txnindex`,
`.snapshot` (producer state) and, beyond Kafka's tool, the text checkpoint files
(`leader-epoch-checkpoint`, `*-offset-checkpoint`).

Files are read with their byte formats, not through the storage classes, so this works
on Kafka's own files and on a log whose broker is running; nothing is written.

Where Kafka's tool dies with an exception we raise `DumpError` after the lines it had
printed; where it reports a problem and goes on with the next file we raise
`FileSkipped`. What it prints to stderr after the last file (index mismatches,
non-consecutive offsets) is collected in `DumpProblems`.
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from odradek.protocol.records import Record
from odradek.storage import dump_decoders
from odradek.storage.dump_batches import (
    INT32_MAX,
    Batch,
    DumpError,
    File,
    FileSkipped,
    batch_line,
    control_text,
    i32,
    iter_batches,
    records,
    slice_batches,
    timestamp_type,
)
from odradek.storage.index import OFFSET_ENTRY, TIME_ENTRY
from odradek.storage.producer_state import SNAPSHOT_ENTRY

__all__ = [
    "Decoder",
    "DumpError",
    "DumpOptions",
    "DumpProblems",
    "FileSkipped",
    "dump_file",
]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
KRAFT_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"

# txn_index.ENTRY's layout, but read as Kafka's tool reads it: the int16 version's
# first byte only.
_ABORTED_TXN = struct.Struct(">bxqqqq")
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_LONG = re.compile(r"[+-]?[0-9]+")
_KRAFT_SNAPSHOT = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")


class Decoder(enum.Enum):
    STRING = "string"
    OFFSETS = "offsets"
    TRANSACTION_LOG = "transaction-log"


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    index_sanity_check: bool = False
    verify_index_only: bool = False
    decoder: Decoder = Decoder.STRING
    skip_record_metadata: bool = False

    @property
    def print_contents(self) -> bool:
        # A decoder implies --print-data-log, which implies --deep-iteration.
        return self.print_data_log or self.decoder is not Decoder.STRING

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_contents


@dataclass
class DumpProblems:
    """What Kafka prints to stderr after the last file, keyed by absolute path."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order_timestamps: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def index_problems(self) -> bool:
        """Whether an index disagrees with its log (non-consecutive offsets are normal
        in compacted and transactional logs, and are not counted)."""
        return bool(
            self.index_mismatches or self.time_index_mismatches
            or self.out_of_order_timestamps or self.offsets_not_found
        )  # fmt: skip

    def lines(self) -> Iterator[str]:
        for name, mismatches in self.index_mismatches.items():
            yield f"Mismatches in :{name}"
            for index_offset in sorted(mismatches, reverse=True):
                yield f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}"
        for name, pairs in self.time_index_mismatches.items():
            yield f"Found timestamp mismatch in :{name}"
            yield from (f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs)
        for name, pairs in self.out_of_order_timestamps.items():
            yield f"Found out of order timestamp in :{name}"
            for a, b in pairs:
                yield f"  Index timestamp: {a}, Previously indexed timestamp: {b}"
        for pairs in self.offsets_not_found.values():
            yield "The following indexed offsets are not found in the log."
            yield from (f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs)
        for name, follows in self.non_consecutive.items():
            yield f"Non-consecutive offsets in {name}"
            yield from (f"  {a} is followed by {follows[a]}" for a in sorted(follows))


def dump_file(
    path: Path, options: DumpOptions | None = None, problems: DumpProblems | None = None
) -> Iterator[str]:
    """Yield Kafka's output lines for one file; raise DumpError or FileSkipped."""
    options = options or DumpOptions()
    problems = problems if problems is not None else DumpProblems()
    yield f"Dumping {path}"
    name = path.name
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix in (".log", ".checkpoint"):
        yield from _dump_log(path, options, problems)
    elif suffix == ".index":
        yield from _dump_index(path, options, problems)
    elif suffix == ".timeindex":
        yield from _dump_time_index(path, options, problems)
    elif suffix == ".txnindex":
        yield from _dump_txn_index(path)
    elif suffix == ".snapshot":
        yield from _dump_producer_snapshot(path)
    elif not suffix and name.endswith("-checkpoint"):
        yield from _dump_checkpoint(path)
    else:
        raise FileSkipped(f"Ignoring unknown file {path}")


# ---------------------------------------------------------------------------- names


def _absolute(path: Path) -> str:
    return str(path.absolute())


def _parse_long(text: str) -> int:
    if _LONG.fullmatch(text) and -(1 << 63) <= int(text) < (1 << 63):
        return int(text)
    raise DumpError(f'For input string: "{text}"')


def _base_offset(path: Path) -> int:
    """The base offset in a segment file's name, as Kafka parses it (up to the first dot)."""
    return _parse_long(path.name.split(".")[0])


def _sibling(path: Path, suffix: str) -> Path:
    return path.absolute().parent / (path.name.split(".")[0] + suffix)


# ---------------------------------------------------------------------------- logs


_PARSERS: dict[Decoder, dump_decoders.Parser] = {
    Decoder.STRING: dump_decoders.parse_string,
    Decoder.OFFSETS: dump_decoders.parse_offsets,
    Decoder.TRANSACTION_LOG: dump_decoders.parse_transaction_log,
}


def _record_lines(
    batch: Batch, options: DumpOptions, follows: dict[int, int], last: list[int]
) -> Iterator[str]:
    control = batch.is_control
    shown_type = timestamp_type(batch.magic, batch.attributes)
    parse = _PARSERS[options.decoder]
    for record in records(batch):
        if record.offset != last[0] + 1:
            follows[last[0]] = record.offset
        last[0] = record.offset
        line = ""
        if not options.skip_record_metadata:
            line = (
                f"| offset: {record.offset} {shown_type}: {record.timestamp} "
                f"keySize: {-1 if record.key is None else len(record.key)} "
                f"valueSize: {-1 if record.value is None else len(record.value)}"
            )
            if batch.magic >= 2:
                line += f" sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]"
            line += record.legacy_check
            if control:
                line += control_text(record)
        if options.print_contents and not control:
            try:
                key, payload = parse(
                    Record(record.offset, record.timestamp, record.key, record.value)
                )
            except dump_decoders.DecoderError as exc:
                raise DumpError(str(exc)) from None
            prefix = "| " if options.skip_record_metadata else " "
            if key is not None:
                line += f"{prefix}key: {key}"
                prefix = " "
            if payload is not None:
                line += f"{prefix}payload: {payload}"
        yield line


def _dump_log(path: Path, options: DumpOptions, problems: DumpProblems) -> Iterator[str]:
    name = path.name
    if name.endswith(".log"):
        yield f"Log starting offset: {_base_offset(path)}"
    elif name == KRAFT_BOOTSTRAP_SNAPSHOT:
        yield "KRaft bootstrap snapshot"
    else:
        match = _KRAFT_SNAPSHOT.match(name)
        if match is None:
            raise DumpError(f"{name} is not a KRaft snapshot name (<offset>-<epoch>.checkpoint)")
        yield f"Snapshot end offset: {int(match[1])}, epoch: {int(match[2])}"
    if options.max_bytes < 0:
        raise DumpError(f"Invalid size: {options.max_bytes} in read from {path}")
    with File(path) as f:
        end = min(options.max_bytes, f.size)
        valid_bytes = 0
        follows: dict[int, int] = {}
        last = [-1]
        try:
            for batch in iter_batches(f, 0, end):
                yield batch_line(batch)
                if options.deep:
                    yield from _record_lines(batch, options, follows, last)
                valid_bytes += batch.size
        finally:
            if follows:
                problems.non_consecutive.setdefault(_absolute(path), {}).update(follows)
        if end - valid_bytes > 0 and options.max_bytes == INT32_MAX:
            yield f"Found {end - valid_bytes} invalid bytes at the end of {name}"


# ---------------------------------------------------------------------------- indexes


def _dump_index(path: Path, options: DumpOptions, problems: DumpProblems) -> Iterator[str]:
    base = _base_offset(path)
    with File(_sibling(path, ".log")) as log, File(path) as index:
        entries = index.size // OFFSET_ENTRY.size
        if entries == 0:
            yield f"{path} is empty."
            return
        data = index.read(0, entries * OFFSET_ENTRY.size)
        if options.index_sanity_check:
            last = base + OFFSET_ENTRY.unpack_from(data, len(data) - OFFSET_ENTRY.size)[0]
            if last < base:
                raise DumpError(
                    f"Corrupt index found, index file {_absolute(path)} has non-zero size "
                    f"but the last offset is {last} which is less than the base offset {base}"
                )
            if index.size % OFFSET_ENTRY.size:
                raise DumpError(
                    f"Index file {_absolute(path)} is corrupt, found {index.size} bytes which "
                    f"is neither positive nor a multiple of {OFFSET_ENTRY.size}"
                )
            yield f"{path} passed sanity check."
            return
        for i, (relative, position) in enumerate(OFFSET_ENTRY.iter_unpack(data)):
            offset = base + relative
            # A sparse file after a crash has zero entries at its end: stop at one.
            if offset == base and i > 0:
                return
            batch = next(slice_batches(log, position, options.max_message_size), None)
            if batch is None:
                raise DumpError(f"No complete record batch at position {position} of {log.path}")
            if batch.last_offset != offset:
                problems.index_mismatches.setdefault(_absolute(path), {})[offset] = (
                    batch.last_offset
                )
            if not options.verify_index_only:
                yield f"offset: {offset} position: {position}"


def _lookup(index: bytes, base: int, target: int) -> int:
    """OffsetIndex.lookup: the position of the largest entry at or below `target`."""
    entries = len(index) // OFFSET_ENTRY.size

    def key(slot: int) -> int:
        return base + int(OFFSET_ENTRY.unpack_from(index, slot * OFFSET_ENTRY.size)[0])

    if entries == 0:
        return 0
    # Kafka searches the last 8 KB of entries first (they stay in the page cache).
    first_hot = max(0, entries - 1 - 8192 // OFFSET_ENTRY.size)
    if key(first_hot) < target:
        lo, hi = first_hot, entries - 1
    elif key(0) > target:
        return 0
    else:
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) // 2
        found = key(mid)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            lo = hi = mid
    return int(OFFSET_ENTRY.unpack_from(index, lo * OFFSET_ENTRY.size)[1])


def _dump_time_index(path: Path, options: DumpOptions, problems: DumpProblems) -> Iterator[str]:
    base = _base_offset(path)
    name = _absolute(path)
    with (
        File(_sibling(path, ".log")) as log,
        File(_sibling(path, ".index")) as offset_index,
        File(path) as time_index,
    ):
        entries = time_index.size // TIME_ENTRY.size
        data = time_index.read(0, entries * TIME_ENTRY.size)
        index = offset_index.read(0, offset_index.size - offset_index.size % OFFSET_ENTRY.size)
        pairs = [(ts, base + rel) for ts, rel in TIME_ENTRY.iter_unpack(data)]
        if options.index_sanity_check:
            _time_index_sanity_check(pairs, base, name, time_index.size)
            yield f"{path} passed sanity check."
            return
        previous = -1
        for i, (timestamp, offset) in enumerate(pairs):
            if offset == base and i > 0:
                return
            position = _lookup(index, base, offset)
            batches = slice_batches(log, position, INT32_MAX)
            batch = next((b for b in batches if b.last_offset >= offset), None)
            if batch is None:
                problems.offsets_not_found.setdefault(name, []).append((offset, -1))
            elif batch.last_offset != offset:
                problems.offsets_not_found.setdefault(name, []).append((offset, batch.last_offset))
            else:
                max_timestamp = max((r.timestamp for r in records(batch)), default=-1)
                if max_timestamp != timestamp:
                    problems.time_index_mismatches.setdefault(name, []).append(
                        (timestamp, max_timestamp)
                    )
                if previous >= timestamp:
                    problems.out_of_order_timestamps.setdefault(name, []).append(
                        (timestamp, previous)
                    )
            if not options.verify_index_only:
                yield f"timestamp: {timestamp} offset: {offset}"
            previous = timestamp


def _time_index_sanity_check(pairs: list[tuple[int, int]], base: int, name: str, size: int) -> None:
    if pairs and pairs[-1][0] < pairs[0][0]:
        raise DumpError(
            f"Corrupt time index found, time index file ({name}) has non-zero size but the "
            f"last timestamp is {pairs[-1][0]} which is less than the first timestamp "
            f"{pairs[0][0]}"
        )
    if pairs and pairs[-1][1] < base:
        raise DumpError(
            f"Corrupt time index found, time index file ({name}) has non-zero size but the "
            f"last offset is {pairs[-1][1]} which is less than the first offset {base}"
        )
    if size % TIME_ENTRY.size:
        raise DumpError(
            f"Time index file {name} is corrupt, found {size} bytes which is neither "
            f"positive nor a multiple of {TIME_ENTRY.size}"
        )


def _dump_txn_index(path: Path) -> Iterator[str]:
    with File(path) as f:
        data = f.read(0, f.size - f.size % _ABORTED_TXN.size)
    for version, producer_id, first, last, stable in _ABORTED_TXN.iter_unpack(data):
        if version > 0:
            raise DumpError(
                f"Unexpected aborted transaction version {version} in transaction index "
                f"{_absolute(path)}, current version is 0"
            )
        yield (
            f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {stable}"
        )


# ---------------------------------------------------------------------------- state files


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return i32(INT32_MAX - (decrement - sequence) + 1)
    return i32(sequence - decrement)


def _dump_producer_snapshot(path: Path) -> Iterator[str]:
    """ProducerStateManager.readSnapshot: version 1, CRC32C of all after the CRC."""
    with File(path) as f:
        data = f.read(0, f.size)
    if len(data) < 2:
        raise FileSkipped("Snapshot failed schema validation: null")
    (version,) = struct.unpack_from(">h", data)
    if version != 1:
        raise FileSkipped(
            "Snapshot failed schema validation: Snapshot contained an unknown file version "
            f"{version}"
        )
    if len(data) < _SNAPSHOT_HEAD.size:
        raise FileSkipped("Snapshot failed schema validation: null")
    _, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    remaining = len(data) - _SNAPSHOT_HEAD.size
    if count < 0:
        raise FileSkipped("Snapshot failed schema validation: "
                          "non-nullable field producerEntries was serialized as null")  # fmt: skip
    if count > remaining:
        raise FileSkipped(
            "Snapshot failed schema validation: Tried to allocate a collection of size "
            f"{count}, but there are only {remaining} bytes remaining."
        )
    if count * SNAPSHOT_ENTRY.size > remaining:
        raise FileSkipped("Snapshot failed schema validation: null")
    computed = crc32c.crc32c(data[6:])
    if crc != computed:
        raise FileSkipped(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
            f"Computed crc: {computed}"
        )
    entries = data[_SNAPSHOT_HEAD.size : _SNAPSHOT_HEAD.size + count * SNAPSHOT_ENTRY.size]
    for entry in SNAPSHOT_ENTRY.iter_unpack(entries):
        (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
         coordinator_epoch, txn_first_offset) = entry  # fmt: skip
        first = "OptionalLong.empty"
        if txn_first_offset >= 0:
            first = f"OptionalLong[{txn_first_offset}]"
        line = (
            f"producerId: {producer_id} producerEpoch: {epoch} "
            f"coordinatorEpoch: {coordinator_epoch} currentTxnFirstOffset: {first} "
            f"lastTimestamp: {timestamp}"
        )
        if last_offset >= 0:
            line += (
                f" firstSequence: {_decrement_sequence(last_sequence, offset_delta)} "
                f"lastSequence: {last_sequence} lastOffset: {last_offset} "
                f"offsetDelta: {offset_delta} timestamp: {timestamp}"
            )
        yield line


def _dump_checkpoint(path: Path) -> Iterator[str]:
    """Kafka's checkpoint text: version 0, the entry count, one entry a line.

    Not in Kafka's tool (which fails on a name without a dot). Entries are printed in the
    tool's "name: value" style; the file is validated as Kafka's CheckpointFile reads it.
    """
    location = _absolute(path)
    with File(path) as f:
        text = f.read(0, f.size).decode("utf-8", "replace")
    lines = re.split(r"\r\n|\r|\n", text)
    if lines[-1] == "":
        lines.pop()

    def malformed(line: str) -> DumpError:
        return DumpError(f"Malformed line in checkpoint file [{location}]: {line}")

    def number(text: str, line: str) -> int:
        if not _LONG.fullmatch(text):
            raise malformed(line)
        return int(text)

    if not lines:
        return
    version = number(lines[0], lines[0])
    if version != 0:
        raise DumpError(
            f"Unrecognised version:{version}, expected version: 0 in checkpoint file at: {location}"
        )
    if len(lines) < 2:
        return
    expected = number(lines[1], lines[1])
    epochs = path.name == LEADER_EPOCH_CHECKPOINT
    out: list[str] = []
    for line in lines[2:]:
        parts = _JAVA_WHITESPACE.split(line)
        while parts and parts[-1] == "":
            parts.pop()
        if epochs and len(parts) == 2:
            out.append(f"epoch: {number(parts[0], line)} startOffset: {number(parts[1], line)}")
        elif not epochs and len(parts) == 3:
            out.append(
                f"topic: {parts[0]} partition: {number(parts[1], line)} "
                f"offset: {number(parts[2], line)}"
            )
        else:
            raise malformed(line)
    if len(out) != expected:
        raise DumpError(
            f"Expected [{expected}] entries in checkpoint file [{location}], "
            f"but found only [{len(out)}]"
        )
    yield from out
