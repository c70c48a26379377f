"""Produced → visible in the lake: how long a record takes to be readable in Iceberg.

    .venv/bin/python -m bench.pipeline_latency [--rate 10000] [--seconds 60] [--trigger 2]

A producer process sends fleet telemetry (JSON, ~130 B) at a steady `--rate` into a
2-partition topic while the lake ingest job runs with a `--trigger`-second processing
trigger. The rated producer starts once a first batch of 1,000 records has landed (Spark's
start and its first batch's code generation are not what a running job shows). A record's
latency is the commit time of the first snapshot whose recorded end offsets pass it (the
moment a reader of the table can see it) minus its Kafka timestamp (CreateTime, set by the
producer when it sent the record). Printed: p50, p99 and max over every record after the
first `--warm-up` seconds, and the snapshots' count. Issue 16's goal: p99 ≤ 5 s at 10,000 events/s
with a 2 s trigger.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from bench.pipeline_common import broker

PARTITIONS = 2


def produce_at_rate(bootstrap: str, topic: str, rate: int, seconds: float,
                    count: Any) -> None:
    """The producer process: `rate` records a second in 10 ms slices, for `seconds`;
    how many it sent goes into `count`."""
    from confluent_kafka import Producer

    from odradek.pipeline.fleet import FleetConfig, FleetSimulator

    sim = FleetSimulator(FleetConfig(firmware_update_after=None, malformed_share=0.0,
                                     start_ms=1_700_000_000_000, step_ms=10))
    values = [r.value for r in sim.records(10_000)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    per_slice = max(1, rate // 100)
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + per_slice
        while sent < due:
            producer.produce(topic, values[sent % len(values)], key=b"dev-%03d" % (sent % 100))
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, started + sent / rate - time.monotonic()))
    producer.flush(60)
    count.value = sent


def latencies(table: Any, topic: str, since_ms: float) -> tuple[np.ndarray, int]:
    """Seconds from each record's timestamp to its first visible snapshot; batches seen."""
    from odradek.pipeline.lake_catalog import SUMMARY_OFFSETS

    snaps = sorted((s for s in table.metadata.snapshots if s.summary is not None
                    and SUMMARY_OFFSETS in s.summary.additional_properties),
                   key=lambda s: s.timestamp_ms)
    ends: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for snap in snaps:
        offsets = json.loads(snap.summary.additional_properties[SUMMARY_OFFSETS])
        for p, end in offsets.get(topic, {}).items():
            ends[int(p)].append((int(end), snap.timestamp_ms))
    rows = table.scan(selected_fields=("_partition", "_offset", "_timestamp")).to_arrow()
    out = []
    for p in range(PARTITIONS):
        mine = rows.filter(np.asarray(rows["_partition"]) == p)
        if not ends[p] or mine.num_rows == 0:
            continue
        end_offsets = np.array([e for e, _ in ends[p]])
        visible_ms = np.array([t for _, t in ends[p]], dtype=np.float64)
        offsets = np.asarray(mine["_offset"])
        stamps = np.asarray(mine["_timestamp"].cast("int64")) / 1000.0  # µs → ms
        first = np.searchsorted(end_offsets, offsets, side="right")
        seen = first < len(end_offsets)
        lat = (visible_ms[first[seen]] - stamps[seen]) / 1000.0
        out.append(lat[stamps[seen] >= since_ms])
    return (np.concatenate(out) if out else np.array([])), len(snaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="records per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--trigger", type=float, default=2.0, help="seconds between batches")
    parser.add_argument("--warm-up", type=float, default=5.0,
                        help="seconds of records left out of the figures")
    parser.add_argument("--bootstrap-server", default=None)
    args = parser.parse_args()

    import threading

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
    from odradek.pipeline.lake_writer import BatchResult
    from odradek.pipeline.session import build_session

    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    try:
        with broker(args.bootstrap_server) as bootstrap:
            topic = f"bench-latency-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
                f.result(30)
            spark = build_session(app_name="bench-latency",
                                  extra={"spark.ui.showConsoleProgress": "false"})
            lake = LakeConfig.local(work / "lake")
            job = IngestJob(bootstrap=bootstrap, table="bench.events", lake=lake,
                            checkpoint=work / "ckpt", topics=[topic],
                            trigger_interval=f"{args.trigger:g} seconds",
                            starting_offsets="earliest")
            landed = threading.Event()

            def on_batch(result: BatchResult) -> None:
                if result.rows:
                    landed.set()

            query = start_ingest(spark, job, on_batch=on_batch)
            first = Producer({"bootstrap.servers": bootstrap})
            for i in range(1_000):
                first.produce(topic, b'{"warm": %d}' % i)
            first.flush(30)
            if not landed.wait(600):
                raise SystemExit("the first batch did not land in 600 s")
            ctx = multiprocessing.get_context("spawn")
            sent = ctx.Value("q", 0)
            started_ms = time.time() * 1000
            producer = ctx.Process(target=produce_at_rate,
                                   args=(bootstrap, topic, args.rate, args.seconds, sent))
            producer.start()
            producer.join(args.seconds + 120)
            total = 1_000 + sent.value
            catalog = open_catalog(lake)
            deadline = time.monotonic() + 120
            rows = 0
            while time.monotonic() < deadline:  # until the last record is in the table
                if catalog.table_exists("bench.events"):
                    rows = catalog.load_table("bench.events").scan(
                        selected_fields=("_offset",)).to_arrow().num_rows
                    if rows >= total:
                        break
                if query.exception() is not None:
                    raise SystemExit(f"ingest failed: {query.exception()}")
                time.sleep(0.5)
            query.stop()
            spark.stop()
            lat, batches = latencies(catalog.load_table("bench.events"), topic,
                                     started_ms + args.warm_up * 1000)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if lat.size == 0:
        raise SystemExit("no record measured")
    p50, p99 = np.percentile(lat, [50, 99])
    print(f"\n{rows:,} of {total:,} records in {batches} snapshots; rate {args.rate:,}/s for "
          f"{args.seconds:g}s, trigger {args.trigger:g}s, first {args.warm_up:g}s left out")
    print("| records measured | p50 s | p99 s | max s | goal p99 ≤ 5 s |")
    print("|---:|---:|---:|---:|---|")
    print(f"| {lat.size:,} | {p50:.2f} | {p99:.2f} | {lat.max():.2f} | "
          f"{'met' if p99 <= 5 else 'not met'} |")


if __name__ == "__main__":
    main()
