"""`odradek perf produce|consume|latency`: Kafka's perf-test tools, over confluent-kafka.

`produce` is kafka-producer-perf-test, `consume` is kafka-consumer-perf-test, and `latency`
measures end-to-end latency at a fixed rate (Kafka's EndToEndLatency sends one record at a
time, which measures round trips rather than a stream). Each shows a progress bar on a
terminal and ends with one summary line in the Kafka tool's format; `--json` prints one
JSON object instead, for scripts (bench/ reads it).

Sizes are in Kafka's tools' units: MB = 2^20 bytes.
"""

from __future__ import annotations

import datetime
import json
import random
import statistics
import string
import struct
import threading
import time
import uuid
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from odradek.cli.common import BootstrapOption, console, err_console, fail, parse_pairs, reported
from odradek.cli.signals import long_running

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Performance tools: produce, consume and end-to-end latency",
    pretty_exceptions_enable=False,
)

MIB = 1024 * 1024
# Latencies kept for percentiles: all of them up to this many, then every k-th, so that
# memory stays bounded (8 bytes each) whatever --num-records says.
MAX_LATENCY_SAMPLES = 1_000_000
# How often the send loops serve delivery callbacks and redraw (records, seconds).
POLL_EVERY = 1024
REDRAW_SECONDS = 0.1

PropsOption = typer.Option(
    None, "--producer-props",
    help="Producer config k=v; repeatable, or several comma-separated")
ConsumerPropsOption = typer.Option(
    None, "--consumer-props",
    help="Consumer config k=v; repeatable, or several comma-separated")
JsonOption = typer.Option(False, "--json", help="Print one JSON object instead of the summary")


class _LastError:
    """librdkafka's error callback: keeps the latest client-level error (a broker down, a
    refused connection) for the final message, instead of a log line per reconnect."""

    def __init__(self) -> None:
        self.text = ""

    def __call__(self, err: Any) -> None:
        self.text = str(err.str())

    def suffix(self) -> str:
        return f" (last client error: {self.text})" if self.text else ""


def _config(bootstrap: str, props: list[str] | None, last_error: _LastError
            ) -> dict[str, Any]:
    # Explicit properties win over --bootstrap-server, as in Kafka's tools.
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 2,
                            "error_cb": last_error}
    conf.update(parse_pairs(props, "property"))
    return conf


def _payload(size: int) -> bytes:
    # Like Kafka's tool: one random printable payload, sent for every record.
    rng = random.Random(size)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


@contextmanager
def _progress(description: str, total: int, enabled: bool) -> Iterator[tuple[Progress, TaskID]]:
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
        console=err_console, transient=True,
        disable=not (enabled and err_console.is_terminal))
    with progress:
        yield progress, progress.add_task(description, total=total, rate="")


def _ms_percentiles(samples: array[float] | list[float], quantiles: tuple[float, ...]
                    ) -> list[float]:
    """Nearest-rank percentiles in ms of samples in seconds."""
    ordered = sorted(samples)
    if not ordered:
        return [0.0 for _ in quantiles]
    n = len(ordered)
    return [ordered[min(n - 1, max(0, int(q / 100 * n + 0.5) - 1))] * 1000 for q in quantiles]


def _emit(as_json: bool, data: dict[str, Any], line: str) -> None:
    if as_json:
        print(json.dumps(data), flush=True)
    else:
        console.print(line, highlight=False, soft_wrap=True)


# --- produce -------------------------------------------------------------------------

@dataclass
class _Deliveries:
    """Counts delivery reports; keeps sampled latencies (seconds)."""

    sample_every: int
    acked: int = 0
    errors: int = 0
    first_error: str = ""
    latencies: array[float] = field(default_factory=lambda: array("d"))

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            if not self.first_error:
                self.first_error = str(err.str())
            return
        self.acked += 1
        if self.acked % self.sample_every == 0:
            latency = msg.latency()
            if latency is not None:
                self.latencies.append(latency)


class _Throttle:
    """Holds a loop to `rate` per second on average (Kafka's ThroughputThrottler's job)."""

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start

    def wait(self, done: int) -> None:
        if self.rate <= 0:
            return
        ahead = self.start + done / self.rate - time.monotonic()
        # Sleeping for less than a millisecond oversleeps; catch up in small bursts instead.
        if ahead > 0.001:
            time.sleep(ahead)


@app.command("produce")
@long_running
def produce(
    topic: str = typer.Option(..., "--topic", help="Topic to produce to"),
    num_records: int = typer.Option(..., "--num-records", min=1),
    record_size: int = typer.Option(100, "--record-size", min=0, help="Bytes per value"),
    throughput: float = typer.Option(
        -1, "--throughput", help="Cap in records/s; -1 for as fast as possible"),
    producer_props: list[str] | None = PropsOption,
    bootstrap: str = BootstrapOption,
    timeout: float = typer.Option(600.0, "--timeout", min=1,
                                  help="Give up after this many seconds"),
    as_json: bool = JsonOption,
) -> None:
    """Send records as fast as possible (or at --throughput); like kafka-producer-perf-test."""
    from confluent_kafka import Producer

    last_error = _LastError()
    conf = _config(bootstrap, producer_props, last_error)
    payload = _payload(record_size)
    deliveries = _Deliveries(sample_every=max(1, num_records // MAX_LATENCY_SAMPLES))
    with reported(), _progress("produce", num_records, not as_json) as (bar, task):
        producer = Producer(conf)
        send = producer.produce
        start = time.monotonic()
        deadline = start + timeout
        throttle = _Throttle(throughput, start)
        next_redraw = start
        timed_out = False
        for i in range(num_records):
            while True:  # bounded by the deadline: BufferError means the queue is full
                try:
                    send(topic, payload, on_delivery=deliveries)
                    break
                except BufferError:
                    producer.poll(0.005)
                    if time.monotonic() > deadline:
                        timed_out = True
                        break
            if timed_out:
                break
            if i % POLL_EVERY == 0 or throughput > 0:
                producer.poll(0)
                throttle.wait(i + 1)
                now = time.monotonic()
                if now > deadline:
                    break
                if now >= next_redraw:
                    bar.update(task, completed=deliveries.acked,
                               rate=f"{deliveries.acked / max(now - start, 1e-9):,.0f} rec/s")
                    next_redraw = now + REDRAW_SECONDS
        # Bounded by the deadline: flush in slices to keep the bar moving.
        while len(producer) > 0 and time.monotonic() < deadline:
            producer.flush(REDRAW_SECONDS)
            bar.update(task, completed=deliveries.acked)
        elapsed = time.monotonic() - start
        unsent = len(producer)

    sent = deliveries.acked
    avg_ms = statistics.fmean(deliveries.latencies) * 1000 if deliveries.latencies else 0.0
    max_ms = max(deliveries.latencies, default=0.0) * 1000
    p50, p95, p99, p999 = _ms_percentiles(deliveries.latencies, (50, 95, 99, 99.9))
    rate = sent / elapsed if elapsed > 0 else 0.0
    data = {
        "records": sent, "errors": deliveries.errors, "unsent": unsent,
        "bytes": sent * record_size, "seconds": elapsed, "records_per_sec": rate,
        "mb_per_sec": rate * record_size / MIB, "avg_latency_ms": avg_ms,
        "max_latency_ms": max_ms, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "p999_ms": p999,
    }
    _emit(as_json, data,
          f"{sent} records sent, {rate:.1f} records/sec ({rate * record_size / MIB:.2f} MB/sec),"
          f" {avg_ms:.2f} ms avg latency, {max_ms:.2f} ms max latency, {p50:.0f} ms 50th,"
          f" {p95:.0f} ms 95th, {p99:.0f} ms 99th, {p999:.0f} ms 99.9th.")
    if deliveries.errors:
        fail(f"{deliveries.errors} records failed: {deliveries.first_error}")
    if sent < num_records:
        fail(f"only {sent} of {num_records} records acknowledged within {timeout:g}s"
             + last_error.suffix())


# --- consume -------------------------------------------------------------------------

def _kafka_time(t: float) -> str:
    # Kafka's consumer perf tool prints yyyy-MM-dd HH:mm:ss:SSS.
    dt = datetime.datetime.fromtimestamp(t)
    return dt.strftime("%Y-%m-%d %H:%M:%S:") + f"{dt.microsecond // 1000:03d}"


@app.command("consume")
@long_running
def consume(
    topic: str = typer.Option(..., "--topic", help="Topic to consume"),
    messages: int = typer.Option(..., "--messages", min=1, help="Records to consume"),
    group: str | None = typer.Option(
        None, "--group", help="Subscribe in this group; without it the tool assigns itself "
        "every partition (no rebalance)"),
    from_latest: bool = typer.Option(False, "--from-latest",
                                     help="Start at the end, not the beginning"),
    consumer_props: list[str] | None = ConsumerPropsOption,
    bootstrap: str = BootstrapOption,
    timeout: float = typer.Option(10.0, "--timeout", min=0.1,
                                  help="Give up after this many seconds without a record"),
    hide_header: bool = typer.Option(False, "--hide-header"),
    as_json: bool = JsonOption,
) -> None:
    """Read records and report throughput; like kafka-consumer-perf-test."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    last_error = _LastError()
    conf = _config(bootstrap, consumer_props, last_error)
    conf.setdefault("group.id", group or f"odradek-perf-{uuid.uuid4().hex[:8]}")
    conf.setdefault("enable.auto.commit", False)
    conf.setdefault("auto.offset.reset", "latest" if from_latest else "earliest")
    # librdkafka's consumer waits 1 s (fetch.queue.backoff.ms) once its queue is full,
    # and with small records it fills in milliseconds; keep it fetching.
    conf.setdefault("fetch.queue.backoff.ms", 10)
    conf.setdefault("queued.min.messages", 1_000_000)
    assigned_at: list[float] = []

    def on_assign(consumer: Any, partitions: Any) -> None:
        if not assigned_at:
            assigned_at.append(time.monotonic())

    with reported(), _progress("consume", messages, not as_json) as (bar, task):
        consumer = Consumer(conf)
        try:
            wall_start = time.time()
            start = time.monotonic()
            md = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if md is None or md.error is not None or not md.partitions:
                fail(f"Topic '{topic}' does not exist.")
            if group is not None:
                consumer.subscribe([topic], on_assign=on_assign)
            else:
                begin = OFFSET_END if from_latest else OFFSET_BEGINNING
                consumer.assign([TopicPartition(topic, p, begin) for p in sorted(md.partitions)])
                assigned_at.append(time.monotonic())
            count = nbytes = 0
            first = last = 0.0
            idle_since = time.monotonic()
            next_redraw = 0.0
            # Bounded: every pass either counts records toward --messages or waits at most
            # 0.5 s toward --timeout.
            while count < messages:
                if count:
                    batch = consumer.consume(num_messages=min(10_000, messages - count),
                                             timeout=0.5)
                else:  # poll() returns on the first record: the data clock starts there
                    one = consumer.poll(0.5)
                    batch = [] if one is None else [one]
                now = time.monotonic()
                if not batch:
                    if now - idle_since > timeout:
                        break
                    continue
                for msg in batch:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        fail(f"consume error: {err.str()}")
                    value, key = msg.value(), msg.key()
                    nbytes += (len(value) if value else 0) + (len(key) if key else 0)
                    count += 1
                if not first and count:
                    first = now
                last = idle_since = now
                if now >= next_redraw:
                    bar.update(task, completed=count,
                               rate=f"{nbytes / MIB / max(now - first, 1e-9):,.1f} MB/s")
                    next_redraw = now + REDRAW_SECONDS
        finally:
            consumer.close()

    end = last or time.monotonic()
    total = end - start
    rebalance = (assigned_at[0] - start) if assigned_at and group is not None else 0.0
    fetch = max(total - rebalance, 1e-9)
    mb = nbytes / MIB
    data = {
        "records": count, "bytes": nbytes, "seconds": total, "rebalance_seconds": rebalance,
        "fetch_seconds": fetch, "data_seconds": (last - first) if count else 0.0,
        "mb_per_sec": mb / max(total, 1e-9), "records_per_sec": count / max(total, 1e-9),
        "fetch_mb_per_sec": mb / fetch, "fetch_records_per_sec": count / fetch,
    }
    header = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
              "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    line = (f"{_kafka_time(wall_start)}, {_kafka_time(wall_start + total)}, {mb:.4f}, "
            f"{data['mb_per_sec']:.4f}, {count}, {data['records_per_sec']:.4f}, "
            f"{rebalance * 1000:.0f}, {fetch * 1000:.0f}, {data['fetch_mb_per_sec']:.4f}, "
            f"{data['fetch_records_per_sec']:.4f}")
    _emit(as_json, data, line if hide_header else f"{header}\n{line}")
    if count < messages:
        fail(f"only {count} of {messages} records arrived (none for {timeout:g}s)"
             + last_error.suffix())


# --- latency -------------------------------------------------------------------------

_STAMP = struct.Struct(">8sQQ")  # run id, sequence number, send time (perf_counter_ns)


@dataclass
class _Arrivals:
    run_id: bytes
    total: int
    latencies: array[float] = field(default_factory=lambda: array("d"))
    seen: bytearray = field(default_factory=bytearray)
    received: int = 0
    error: str = ""

    def __post_init__(self) -> None:
        self.latencies = array("d", [float("nan")]) * self.total
        self.seen = bytearray(self.total)


def _receive(consumer: Any, arrivals: _Arrivals, stop: threading.Event, deadline: float) -> None:
    """The consumer side, in a thread: the GIL is released while librdkafka waits."""
    from confluent_kafka import KafkaError

    # Bounded by `deadline` and by the stop event.
    while arrivals.received < arrivals.total and not stop.is_set():
        if time.monotonic() > deadline:
            return
        # poll() returns on the first record (consume() would wait for a full batch); what
        # arrived with it is drained at once and shares its arrival time.
        first = consumer.poll(0.05)
        now = time.perf_counter_ns()
        if first is None:
            continue
        for msg in [first, *consumer.consume(num_messages=1000, timeout=0)]:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF and not arrivals.error:
                    arrivals.error = str(err.str())
                continue
            value = msg.value()
            if value is None or len(value) < _STAMP.size:
                continue
            run_id, seq, sent_ns = _STAMP.unpack_from(value)
            # Other runs' records (a topic reused) are skipped, and so are duplicates.
            if run_id != arrivals.run_id or seq >= arrivals.total or arrivals.seen[seq]:
                continue
            arrivals.seen[seq] = 1
            arrivals.latencies[seq] = (now - sent_ns) / 1e9
            arrivals.received += 1


@app.command("latency")
@long_running
def latency(
    topic: str = typer.Option(..., "--topic", help="Topic to produce to and consume from"),
    num_records: int = typer.Option(10_000, "--num-records", min=1),
    throughput: float = typer.Option(1000.0, "--throughput", min=1, help="Records/s sent"),
    record_size: int = typer.Option(100, "--record-size", min=_STAMP.size),
    warmup_records: int = typer.Option(
        -1, "--warmup-records", help="Leading records left out of the statistics; "
        "-1 for one second's worth (at most a tenth of --num-records)"),
    producer_props: list[str] | None = PropsOption,
    consumer_props: list[str] | None = ConsumerPropsOption,
    bootstrap: str = BootstrapOption,
    timeout: float = typer.Option(600.0, "--timeout", min=1,
                                  help="Give up after this many seconds"),
    as_json: bool = JsonOption,
) -> None:
    """End-to-end latency (send to receive) at a fixed rate: p50, p99, p99.9."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    warmup = warmup_records if warmup_records >= 0 else min(int(throughput),
                                                            num_records // 10)
    warmup = min(warmup, num_records - 1)
    last_error = _LastError()
    pconf = _config(bootstrap, producer_props, last_error)
    pconf.setdefault("linger.ms", 0)
    cconf = _config(bootstrap, consumer_props, last_error)
    cconf.setdefault("group.id", f"odradek-perf-latency-{uuid.uuid4().hex[:8]}")
    cconf.setdefault("enable.auto.commit", False)
    run_id = uuid.uuid4().bytes[:8]
    pad = b"x" * (record_size - _STAMP.size)
    arrivals = _Arrivals(run_id, num_records)
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err.str()))

    with reported(), _progress("latency", num_records, not as_json) as (bar, task):
        producer = Producer(pconf)
        consumer = Consumer(cconf)
        stop = threading.Event()
        start = time.monotonic()
        deadline = start + timeout
        receiver: threading.Thread | None = None
        try:
            md = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if md is None or md.error is not None or not md.partitions:
                fail(f"Topic '{topic}' does not exist.")
            # Start each partition at its current end: what is sent from now on is read,
            # with no race against an "end" resolved later. The run id filters out any
            # older record a broker's end offset would let through.
            tps = []
            for p in sorted(md.partitions):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                tps.append(TopicPartition(topic, p, max(high, 0)))
            consumer.assign(tps)
            receiver = threading.Thread(target=_receive, name="perf-latency-consumer",
                                        args=(consumer, arrivals, stop, deadline), daemon=True)
            receiver.start()
            throttle = _Throttle(throughput, time.monotonic())
            next_redraw = 0.0
            for seq in range(num_records):
                throttle.wait(seq)
                producer.produce(topic, _STAMP.pack(run_id, seq, time.perf_counter_ns()) + pad,
                                 on_delivery=delivered)
                producer.poll(0)
                now = time.monotonic()
                if now > deadline:
                    break
                if now >= next_redraw:
                    bar.update(task, completed=arrivals.received,
                               rate=f"{seq / max(now - throttle.start, 1e-9):,.0f} rec/s")
                    next_redraw = now + REDRAW_SECONDS
            send_seconds = time.monotonic() - throttle.start
            producer.flush(max(0.0, min(30.0, deadline - time.monotonic())))
            # The last records may wait one fetch.wait.max.ms and more; bounded by the deadline.
            while receiver.is_alive() and time.monotonic() < deadline:
                receiver.join(REDRAW_SECONDS)
                bar.update(task, completed=arrivals.received)
        finally:
            stop.set()
            if receiver is not None:
                receiver.join(5)
            consumer.close()

    measured = [x for x in arrivals.latencies[warmup:] if x == x]  # NaN: never arrived
    lost = (num_records - warmup) - len(measured)
    p50, p99, p999 = _ms_percentiles(measured, (50, 99, 99.9))
    avg_ms = statistics.fmean(measured) * 1000 if measured else 0.0
    max_ms = max(measured, default=0.0) * 1000
    rate = num_records / send_seconds if send_seconds > 0 else 0.0
    data = {
        "sent": num_records, "measured": num_records - warmup, "received": len(measured),
        "lost": lost, "warmup": warmup, "records_per_sec": rate, "avg_ms": avg_ms,
        "max_ms": max_ms, "p50_ms": p50, "p99_ms": p99, "p999_ms": p999,
    }
    _emit(as_json, data,
          f"{len(measured)} records received, {rate:.1f} records/sec, {avg_ms:.2f} ms avg "
          f"latency, {max_ms:.2f} ms max latency, {p50:.2f} ms 50th, {p99:.2f} ms 99th, "
          f"{p999:.2f} ms 99.9th.")
    if failures:
        fail(f"{len(failures)} records failed: {failures[0]}")
    if arrivals.error:
        fail(f"consume error: {arrivals.error}")
    if lost:
        fail(f"{lost} of {num_records - warmup} measured records never arrived"
             + last_error.suffix())


if __name__ == "__main__":
    app()
