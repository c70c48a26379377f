"""The message browser: read a window of records by partition, offset, timestamp or key
substring, and show each value decoded as JSON, Avro, text or hex; and the test producer.

A consumer is assigned (never subscribed: no group joins, nothing is committed) and
closed after each look, so a browse leaves no trace on the cluster.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.console.admin import ConsoleError, error_text
from odradek.console.settings import ConsoleSettings

MAX_LIMIT = 500
SHOW_BYTES = 16 * 1024  # a huge value is cut on the page, with what was left out said
SCAN_LIMIT = 20_000  # records a key search reads at most per partition
FORMATS = ("auto", "json", "text", "avro", "hex")


@dataclass(frozen=True)
class BrowseQuery:
    topic: str
    partition: int | None = None  # None: every partition
    offset: int | None = None  # None: the newest `limit` records (or from `timestamp`)
    timestamp_ms: int | None = None
    key: str = ""
    limit: int = 50
    format: str = "auto"
    avro_schema: str = ""

    @staticmethod
    def parse(topic: str, params: dict[str, str]) -> BrowseQuery:
        """From a page's query string; a malformed field is a ConsoleError naming it."""
        def integer(name: str, low: int) -> int | None:
            raw = params.get(name, "").strip()
            if not raw:
                return None
            try:
                value = int(raw)
            except ValueError:
                raise ConsoleError(f"{name} must be a whole number, got {raw!r}") from None
            if value < low:
                raise ConsoleError(f"{name} must be at least {low}, got {value}")
            return value

        stamp = params.get("timestamp", "").strip()
        ms = None
        if stamp:
            try:
                ms = int(stamp) if stamp.isdigit() else parse_time(stamp)
            except ValueError:
                raise ConsoleError(f"timestamp must be epoch milliseconds or an ISO date "
                                   f"such as 2026-11-25T10:00:00, got {stamp!r}") from None
        fmt = params.get("format", "auto") or "auto"
        if fmt not in FORMATS:
            raise ConsoleError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        limit = integer("limit", 1) or 50
        return BrowseQuery(topic, integer("partition", 0), integer("offset", 0), ms,
                           params.get("key", ""), min(limit, MAX_LIMIT), fmt,
                           params.get("avro_schema", ""))


def parse_time(text: str) -> int:
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


@dataclass(frozen=True)
class Shown:
    """A key or value as the page shows it."""

    text: str
    kind: str  # json, text, avro, hex, null
    note: str = ""  # e.g. "not valid UTF-8", "cut: 1.2 MB more"


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp: str
    key: Shown
    value: Shown
    headers: list[tuple[str, str]]
    size: int


@dataclass
class BrowseResult:
    records: list[Record] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _cut(data: bytes) -> tuple[bytes, str]:
    if len(data) <= SHOW_BYTES:
        return data, ""
    return data[:SHOW_BYTES], f"cut: {len(data) - SHOW_BYTES} more bytes of {len(data)}"


def show(data: bytes | None, fmt: str, avro: Any = None) -> Shown:
    if data is None:
        return Shown("null", "null")
    if fmt == "avro" and avro is not None:
        why = None
        for decoder in avro:  # Confluent's framing first, then a bare Avro body
            text, why = decoder.decode(data)
            if text is not None:
                return Shown(json.dumps(json.loads(text), indent=1), "avro")
        return Shown(data[:SHOW_BYTES].hex(" "), "hex", why or "")
    if fmt == "hex":
        part, note = _cut(data)
        return Shown(part.hex(" "), "hex", note)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        part, note = _cut(data)
        return Shown(part.hex(" "), "hex", "; ".join(x for x in ("not valid UTF-8", note) if x))
    if fmt in ("auto", "json"):
        try:
            parsed = json.loads(text)
            if len(data) <= SHOW_BYTES:
                return Shown(json.dumps(parsed, indent=1, ensure_ascii=False), "json")
        except ValueError:
            if fmt == "json":
                part, note = _cut(data)
                return Shown(part.decode("utf-8", "replace"), "text",
                             "; ".join(x for x in ("not valid JSON", note) if x))
    part, note = _cut(data)
    return Shown(part.decode("utf-8", "replace"), "text", note)


def _avro_decoder(schema_text: str) -> Any:
    if not schema_text.strip():
        raise ConsoleError("Avro needs the writer's schema: paste it into the schema field")
    try:
        from odradek.pipeline.avro_values import AvroDecoder
    except ImportError:
        raise ConsoleError("Avro decoding needs fastavro (pip install 'odradek[pipeline]')") \
            from None
    try:
        schema = json.loads(schema_text)
        from fastavro import parse_schema

        parse_schema(schema)
    except Exception as e:  # json or fastavro's SchemaParseException
        raise ConsoleError(f"the Avro schema is not valid: {e}") from None
    full = schema if isinstance(schema, dict) else {"type": schema}
    return (AvroDecoder(full, confluent=True), AvroDecoder(full, confluent=False))


class Browser:
    """One assigned-only consumer kept for the console's life (a new one per look would
    pay for its connections every time); one look at a time."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._consumer: Any = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    def browse(self, partitions: list[int], q: BrowseQuery,
               offsets: Callable[[list[tuple[str, int]]], dict[tuple[str, int],
                                                               tuple[int, int]]],
               deadline_s: float = 5.0) -> BrowseResult:
        """`partitions`: the topic's; `offsets`: (log start, end) of partitions."""
        if q.partition is not None:
            if q.partition not in partitions:
                raise ConsoleError(f"topic {q.topic} has no partition {q.partition} "
                                   f"(it has {len(partitions)})")
            partitions = [q.partition]
        avro = _avro_decoder(q.avro_schema) if q.format == "avro" else None
        result = BrowseResult()
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer(self.settings.kafka_config(**{
                    "group.id": "odradek-console-browser", "enable.auto.commit": False,
                    "enable.partition.eof": True, "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 50, "fetch.message.max.bytes": 4 * 1024 * 1024}))
            consumer = self._consumer
            try:
                starts = _starts(consumer, q, partitions, offsets, self.settings.timeout_s,
                                 result)
                if starts:
                    consumer.assign([TopicPartition(q.topic, p, o) for p, o in starts.items()])
                    try:
                        _read(consumer, q, starts, avro, result,
                              time.monotonic() + deadline_s)
                    finally:
                        consumer.unassign()
            except KafkaException as e:
                consumer.close()
                self._consumer = None
                raise ConsoleError(f"reading {q.topic}: {error_text(e)}") from None
        result.records.sort(key=lambda r: (r.partition, r.offset))
        return result


def _starts(consumer: Any, q: BrowseQuery, partitions: list[int],
            offsets: Callable[[list[tuple[str, int]]], dict[tuple[str, int], tuple[int, int]]],
            timeout: float, result: BrowseResult) -> dict[int, int]:
    out: dict[int, int] = {}
    if q.timestamp_ms is not None:
        found = consumer.offsets_for_times(
            [TopicPartition(q.topic, p, q.timestamp_ms) for p in partitions], timeout=timeout)
        for tp in found:
            if tp.offset >= 0:
                out[tp.partition] = tp.offset
        if not out:
            result.notes.append("no record at or after that time")
        return out
    per_partition = max(q.limit // len(partitions), 1) if not q.key else SCAN_LIMIT
    bounds = offsets([(q.topic, p) for p in partitions])
    for p in partitions:
        if (q.topic, p) not in bounds:
            result.notes.append(f"partition {p}: its offsets are unknown (no leader?)")
            continue
        low, high = bounds[(q.topic, p)]
        if q.offset is not None:
            if q.offset >= high:
                result.notes.append(f"partition {p}: offset {q.offset} is at or past its end "
                                    f"({high})")
                continue
            out[p] = max(q.offset, low)
        elif high > low:
            out[p] = max(high - per_partition, low)
    if not out and not result.notes:
        result.notes.append("no records")
    return out


def _read(consumer: Any, q: BrowseQuery, starts: dict[int, int], avro: Any,
          result: BrowseResult, deadline: float) -> None:
    open_parts = set(starts)
    scanned = dict.fromkeys(starts, 0)
    needle = q.key.encode() if q.key else None
    while open_parts and len(result.records) < q.limit:
        if time.monotonic() > deadline:
            result.notes.append("stopped after a few seconds: narrow by partition or offset")
            break
        # consume() waits until it has num_messages or the timeout passed: ask for what
        # can still come (records wanted plus each partition's end-of-partition event)
        wanted = 500 if needle is not None else q.limit - len(result.records) + len(open_parts)
        for m in consumer.consume(num_messages=min(wanted, 500), timeout=0.05):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(m.partition())
                    continue
                raise ConsoleError(f"reading {q.topic}: {error_text(err)}")
            p = m.partition()
            if p not in open_parts or m.topic() != q.topic:
                continue
            scanned[p] += 1
            if scanned[p] >= SCAN_LIMIT:
                open_parts.discard(p)
                result.notes.append(f"partition {p}: searched {SCAN_LIMIT} records")
            key = m.key()
            if needle is not None and (key is None or needle not in key):
                continue
            value = m.value()
            _kind, ts = m.timestamp()
            when = dt.datetime.fromtimestamp(ts / 1000, dt.UTC).strftime(
                "%Y-%m-%d %H:%M:%S.%f")[:-3] if ts >= 0 else "-"
            headers = [(k, "null" if v is None else show(v, "text").text)
                       for k, v in (m.headers() or [])]
            result.records.append(Record(
                p, m.offset(), when, show(key, "text" if q.format != "hex" else "hex"),
                show(value, q.format, avro), headers, len(value or b"") + len(key or b"")))
            if len(result.records) >= q.limit:
                break


@dataclass(frozen=True)
class TestMessage:
    topic: str
    key: str | None
    value: str
    headers: list[tuple[str, str]]
    partition: int | None


def parse_headers(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        k, sep, v = line.partition("=")
        if not sep or not k.strip():
            raise ConsoleError(f"a header must be name=value, got {line.strip()!r}")
        out.append((k.strip(), v))
    return out


def produce(settings: ConsoleSettings, message: TestMessage) -> tuple[int, int]:
    """Send one record and wait for it; (partition, offset)."""
    producer = Producer(settings.kafka_config(**{"acks": "all", "linger.ms": 0,
                                                 "message.timeout.ms": int(
                                                     settings.timeout_s * 1000)}))
    delivered: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        delivered.append((err, msg))

    kwargs: dict[str, Any] = {"value": message.value.encode(), "headers": message.headers,
                              "on_delivery": on_delivery}
    if message.key is not None:
        kwargs["key"] = message.key.encode()
    if message.partition is not None:
        kwargs["partition"] = message.partition
    try:
        producer.produce(message.topic, **kwargs)
    except Exception as e:  # BufferError, KafkaException: e.g. an unknown partition
        raise ConsoleError(f"producing to {message.topic}: {error_text(e)}") from None
    producer.flush(settings.timeout_s + 1)
    if not delivered:
        raise ConsoleError(f"producing to {message.topic}: no answer in time")
    err, msg = delivered[0]
    if err is not None:
        raise ConsoleError(f"producing to {message.topic}: {error_text(err)}")
    return int(msg.partition()), int(msg.offset())
