"""`odradek produce` and `odradek consume`: the console producer and consumer."""

from __future__ import annotations

import datetime
import sys
import time
import uuid
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, err_console, fail, reported
from odradek.cli.signals import long_running


@long_running
def produce(
    topic: str = typer.Argument(...),
    key_separator: str | None = typer.Option(
        None, "--key-separator", "-K", help="Split each line into key and value at this string"),
    header: list[str] | None = typer.Option(None, "--header", "-H",
                                            help="k=v header on every record; repeatable"),
    partition: int | None = typer.Option(None, "--partition", "-p"),
    compression: str = typer.Option("none", "--compression",
                                    help="none, gzip, snappy, lz4 or zstd"),
    null_marker: str | None = typer.Option(
        None, "--null-marker", help="A value equal to this is sent as null (a tombstone)"),
    acks: str = typer.Option("all", "--acks"),
    producer_property: list[str] | None = typer.Option(None, "--producer-property", "-X"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Send each line of stdin as a record."""
    from confluent_kafka import Producer

    headers = []
    for h in header or []:
        k, sep, v = h.partition("=")
        if not sep:
            fail(f"invalid header '{h}': expected key=value")
        headers.append((k, v.encode()))
    conf = client_config(bootstrap, producer_property)
    conf.update({"compression.type": compression, "acks": acks, "linger.ms": 5})
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    with reported():
        producer = Producer(conf)
        sent = 0
        for line in sys.stdin:
            line = line.rstrip("\n")
            key: str | None = None
            value: str | None = line
            if key_separator is not None:
                if key_separator not in line:
                    fail(f"line {sent + 1} has no key separator {key_separator!r}")
                key, value = line.split(key_separator, 1)
            if null_marker is not None and value == null_marker:
                value = None
            kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or None,
                                      "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            sent += 1
        remaining = producer.flush(30)
        if remaining:
            fail(f"{remaining} records were not delivered within 30 s")
        if failures:
            fail(f"{len(failures)} of {sent} records failed: {failures[0]}")


def _parse_timestamp(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        fail(f"invalid timestamp '{text}': give epoch ms or ISO-8601")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


def _start_offset(text: str) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    named = {"earliest": OFFSET_BEGINNING, "beginning": OFFSET_BEGINNING,
             "latest": OFFSET_END, "end": OFFSET_END}
    if text in named:
        return int(named[text])
    if text.isdigit():
        return int(text)
    fail(f"invalid offset '{text}': give earliest, latest or a number")


def _format(fmt: str, msg: Any) -> str:
    def text(b: bytes | None) -> str:
        return "NULL" if b is None else b.decode("utf-8", "replace")

    headers = msg.headers() or []
    _, ts = msg.timestamp()
    out = fmt
    for token, value in (
        ("%t", msg.topic()),
        ("%p", str(msg.partition())),
        ("%o", str(msg.offset())),
        ("%k", text(msg.key())),
        ("%s", text(msg.value())),
        ("%T", str(ts)),
        ("%h", ",".join(f"{k}={text(v)}" for k, v in headers)),
    ):
        out = out.replace(token, value)
    return out.replace("\\n", "\n").replace("\\t", "\t")


@long_running
def consume(
    topic: str = typer.Argument(...),
    from_beginning: bool = typer.Option(False, "--from-beginning"),
    partition: int | None = typer.Option(None, "--partition", "-p"),
    offset: str | None = typer.Option(None, "--offset", "-o",
                                      help="earliest, latest or a number (with --partition)"),
    timestamp: str | None = typer.Option(None, "--timestamp",
                                         help="Start at this time (epoch ms or ISO-8601)"),
    group: str | None = typer.Option(None, "--group", "-g",
                                     help="Consume in this group and commit offsets"),
    max_messages: int | None = typer.Option(None, "--max-messages", "-c"),
    timeout_ms: int | None = typer.Option(None, "--timeout-ms",
                                          help="Exit after this long without a record"),
    print_key: bool = typer.Option(False, "--print-key"),
    print_headers: bool = typer.Option(False, "--print-headers"),
    print_offset: bool = typer.Option(False, "--print-offset"),
    fmt: str | None = typer.Option(None, "--format", "-f",
                                   help="kcat-style: %t %p %o %k %s %T %h"),
    isolation_level: str = typer.Option("read_uncommitted", "--isolation-level"),
    consumer_property: list[str] | None = typer.Option(None, "--consumer-property", "-X"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Print records of a topic."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    if fmt is None:
        parts = []
        if print_offset:
            parts.append("p=%p o=%o\t")
        if print_headers:
            parts.append("%h\t")
        if print_key:
            parts.append("%k\t")
        fmt = "".join(parts) + "%s"
    conf = client_config(bootstrap, consumer_property)
    conf.update({
        "group.id": group or f"odradek-console-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "isolation.level": isolation_level,
        "enable.partition.eof": False,
    })
    with reported():
        consumer = Consumer(conf)
        try:
            md = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if md is None or md.error is not None:
                fail(f"Topic '{topic}' does not exist.")
            if group is not None and partition is None and offset is None and timestamp is None:
                consumer.subscribe([topic])
            else:
                ids = [partition] if partition is not None else sorted(md.partitions)
                start = OFFSET_BEGINNING if from_beginning else OFFSET_END
                if offset is not None:
                    start = _start_offset(offset)
                tps = [TopicPartition(topic, p, start) for p in ids]
                if timestamp is not None:
                    ts = _parse_timestamp(timestamp)
                    tps = consumer.offsets_for_times(
                        [TopicPartition(topic, p, ts) for p in ids], timeout=30)
                    tps = [TopicPartition(tp.topic, tp.partition,
                                          tp.offset if tp.offset >= 0 else OFFSET_END)
                           for tp in tps]
                consumer.assign(tps)
            seen = 0
            last = time.monotonic()
            while max_messages is None or seen < max_messages:
                msg = consumer.poll(0.2)
                if msg is None:
                    if timeout_ms is not None and (time.monotonic() - last) * 1000 > timeout_ms:
                        break
                    continue
                error = msg.error()
                if error is not None:
                    err_console.print(f"[yellow]warning:[/yellow] {error.str()}")
                    continue
                last = time.monotonic()
                sys.stdout.write(_format(fmt, msg) + "\n")
                sys.stdout.flush()
                seen += 1
        finally:
            consumer.close()
