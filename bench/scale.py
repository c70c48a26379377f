"""How a single broker's costs grow with the partitions it holds (issue 12).

One size at a time, on a fresh data dir: create the partitions (topics of
`--per-topic` partitions each), produce records spread over all of them, then measure
the full-Metadata latency, RSS, open descriptors and idle CPU, restart the broker
cleanly (SIGTERM) and after `kill -9`, and delete every topic. The table puts each cost
against the size, with the exponent of the fitted curve cost ∝ size^k (k ≈ 1: linear,
k ≈ 0: flat; anything well above 1 is a defect to fix at its cause). On a shared machine
the broker's CPU seconds are the steadier reading; wall times move with the load.

    python -m bench.scale                    # 1,000, 5,000 and 20,000 partitions
    python -m bench.scale --huge             # … and 50,000
    python -m bench.scale --sizes 1000,5000  # any sizes
    python -m bench.scale --quick            # CI's size: seconds
    python -m bench.scale --groups 100,1000,10000        # consumer groups (scale_groups.py)
    python -m bench.scale --connections 1000,10000       # idle connections (scale_connections.py)
    python -m bench.scale --cluster 1000,10000,30000     # 3 brokers on ZooKeeper (scale_cluster.py)

With --groups, --connections or --cluster only those dimensions run, unless --sizes is
given too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.brokers import cpu_seconds, rss_kib
from bench.scale_broker import (
    ScaleBroker,
    create_topics,
    idle_cpu_percent,
    metadata_latency_ms,
    partitions_served,
    topic_names,
)

DEFAULT_SIZES = (1_000, 5_000, 20_000)
HUGE = 50_000
QUICK_SIZES = (50, 200)


# --- a raw client: the broker's own cost, not a client library's ----------------------





# --- one broker on a data dir that survives its restarts ---------------------------



# --- the measurements ------------------------------------------------------------------





def delete_topics(bootstrap: str, topics: list[tuple[str, int]]) -> float:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    started = time.monotonic()
    futures = admin.delete_topics([t for t, _ in topics], operation_timeout=600,
                                  request_timeout=600)
    for f in futures.values():
        # the client gives up after its request timeout; the broker carries on
        with contextlib.suppress(Exception):
            f.result()
    while partitions_served(bootstrap) > 0:
        if time.monotonic() - started > 1800:
            raise RuntimeError("topics not deleted within 30 minutes")
        time.sleep(0.1)
    return time.monotonic() - started


def produce_spread(bootstrap: str, topics: list[tuple[str, int]], records: int) -> float:
    """Records/s of 100-byte records sent round robin over every partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000})
    targets = [(t, p) for t, n in topics for p in range(n)]
    value = b"x" * 100
    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    started = time.monotonic()
    for i in range(records):
        topic, partition = targets[i % len(targets)]
        while True:
            try:
                producer.produce(topic, value, partition=partition, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(600)
    elapsed = time.monotonic() - started
    if left or errors:
        raise RuntimeError(f"{left} records not delivered; errors: {errors[:3]}")
    return records / elapsed




@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    fmt: str
    goal: str = ""  # at 20,000 partitions (issue 12)


METRICS = (
    Metric("create_s", "create (s)", "{:.2f}"),
    Metric("create_rate", "create partitions/s", "{:,.0f}", "≥ 1,000/s"),
    Metric("create_cpu_s", "create, broker CPU (s)", "{:.2f}"),
    Metric("produce_rate", "produce records/s", "{:,.0f}"),
    Metric("metadata_ms", "full Metadata (ms)", "{:.1f}", "< 100 ms"),
    Metric("metadata_kib", "Metadata size (KiB)", "{:,.0f}"),
    Metric("rss_mib", "RSS (MiB)", "{:,.0f}", "< 1,024 MiB"),
    Metric("fds", "open fds", "{:,.0f}"),
    Metric("idle_cpu_pct", "idle CPU (% core)", "{:.2f}", "< 2%"),
    Metric("stop_s", "clean stop (s)", "{:.2f}"),
    Metric("restart_s", "clean restart (s)", "{:.2f}", "< 10 s"),
    Metric("restart_work_s", "… of which the broker's start-up (s)", "{:.2f}"),
    Metric("restart_cpu_s", "clean restart, broker CPU (s)", "{:.2f}"),
    Metric("kill9_restart_s", "kill -9 restart (s)", "{:.2f}", "< 30 s"),
    Metric("kill9_work_s", "… of which the broker's start-up (s)", "{:.2f}"),
    Metric("kill9_cpu_s", "kill -9 restart, broker CPU (s)", "{:.2f}"),
    Metric("delete_s", "delete all (s)", "{:.2f}"),
    Metric("delete_cpu_s", "delete all, broker CPU (s)", "{:.2f}"),
)
# Costs that should not grow at all with the size (the exponent is reported anyway).
FLAT = {"create_rate", "produce_rate", "idle_cpu_pct"}


def measure_size(size: int, per_topic: int, workdir: Path, idle_s: float,
                 records: int, extra: dict[str, str], say: Callable[[str], None]
                 ) -> dict[str, float]:
    data_dir = Path(tempfile.mkdtemp(prefix=f"scale-{size}-", dir=workdir))
    broker = ScaleBroker(data_dir, workdir / f"broker-{size}.log", extra)
    topics = topic_names(size, per_topic)
    out: dict[str, float] = {"size": size}
    try:
        broker.start(0)
        cpu = sum(cpu_seconds(broker.pid))
        out["create_s"] = create_topics(broker.bootstrap, topics)
        out["create_cpu_s"] = sum(cpu_seconds(broker.pid)) - cpu
        out["create_rate"] = size / out["create_s"]
        say(f"{size}: created in {out['create_s']:.2f}s")
        out["produce_rate"] = produce_spread(broker.bootstrap, topics, records)
        out["metadata_ms"], nbytes = metadata_latency_ms(broker.bootstrap)
        out["metadata_kib"] = nbytes / 1024
        out["idle_cpu_pct"] = idle_cpu_percent(broker.pid, idle_s)
        out["rss_mib"] = rss_kib(broker.pid) / 1024
        out["fds"] = broker.open_fds()
        out["stop_s"] = broker.stop()
        out["restart_s"] = broker.start(size)
        out["restart_cpu_s"] = sum(cpu_seconds(broker.pid))
        out["restart_work_s"] = broker.startup_work_s()
        say(f"{size}: clean restart {out['restart_s']:.2f}s")
        broker.stop(signal.SIGKILL)
        out["kill9_restart_s"] = broker.start(size)
        out["kill9_cpu_s"] = sum(cpu_seconds(broker.pid))
        out["kill9_work_s"] = broker.startup_work_s()
        say(f"{size}: kill -9 restart {out['kill9_restart_s']:.2f}s")
        cpu = sum(cpu_seconds(broker.pid))
        out["delete_s"] = delete_topics(broker.bootstrap, topics)
        out["delete_cpu_s"] = sum(cpu_seconds(broker.pid)) - cpu
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def exponent(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """k of the least-squares fit log(value) = k·log(size) + c."""
    pts = [(math.log(s), math.log(v)) for s, v in zip(sizes, values, strict=True) if v > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def table(rows: list[dict[str, float]], metrics: Sequence[Metric] = METRICS,
          goal: str = "goal at 20,000") -> str:
    sizes = [r["size"] for r in rows]
    head = ["metric", *(f"{int(s):,}" for s in sizes), "exponent k", goal]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in metrics:
        values = [r.get(m.key) for r in rows]
        cells = [m.fmt.format(v) if v is not None else "—" for v in values]
        k = exponent(sizes, [v for v in values if v is not None]) \
            if all(v is not None for v in values) else None
        lines.append("| " + " | ".join([m.label, *cells,
                                         "—" if k is None else f"{k:.2f}", m.goal]) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="partition counts, comma-separated")
    ap.add_argument("--huge", action="store_true", help=f"add {HUGE:,} partitions")
    ap.add_argument("--quick", action="store_true",
                    help=f"CI's sizes {QUICK_SIZES}: seconds, not minutes")
    ap.add_argument("--per-topic", type=int, default=50, help="partitions per topic")
    ap.add_argument("--records", type=int, default=None,
                    help="records produced (default: 2 per partition, at least 20,000)")
    ap.add_argument("--idle-seconds", type=float, default=None,
                    help="idle CPU window (default 10, quick 1)")
    ap.add_argument("--override", action="append", default=[], metavar="K=V",
                    help="a broker property for every run")
    ap.add_argument("--groups", default=None,
                    help="consumer-group counts, comma-separated (e.g. 100,1000,10000)")
    ap.add_argument("--connections", default=None,
                    help="idle-connection counts, comma-separated (e.g. 1000,10000)")
    ap.add_argument("--cluster", default=None,
                    help="partition counts in a 3-broker ZooKeeper cluster (e.g. 10000,30000)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = ap.parse_args(argv)
    from bench.scale_cluster import CLUSTER_METRICS, SESSION_MS, measure_cluster
    from bench.scale_connections import CONNECTION_METRICS, measure_connections
    from bench.scale_groups import GROUP_METRICS, measure_groups

    def counts(text: str | None) -> list[int]:
        return [int(s.replace("_", "")) for s in text.split(",")] if text else []

    if args.sizes:
        sizes = [int(s.replace("_", "").replace(",", "")) for s in args.sizes.split(",")]
    elif args.groups or args.connections or args.cluster:
        sizes = []
    else:
        sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.huge:
        sizes.append(HUGE)
    group_sizes = counts(args.groups)
    connection_sizes = counts(args.connections)
    cluster_sizes = counts(args.cluster)
    idle_s = args.idle_seconds if args.idle_seconds is not None else (1 if args.quick else 10)
    extra = dict(kv.split("=", 1) for kv in args.override)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="odradek-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    rows = []
    for size in sizes:
        records = args.records or (size * 2 if args.quick else max(size * 2, 20_000))
        rows.append(measure_size(size, args.per_topic, workdir, idle_s, records, extra, say))
    group_rows = [measure_groups(n, workdir, say) for n in group_sizes]
    connection_rows = [measure_connections(n, workdir, say) for n in connection_sizes]
    cluster_rows = [measure_cluster(n, args.per_topic, idle_s, say) for n in cluster_sizes]
    load = os.getloadavg()
    where = (f"one broker, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
             f"{os.cpu_count()} cores; exponent k of cost ∝ size^k")
    if rows:
        print(table(rows))
        print(f"\npartitions, {args.per_topic} per topic, {where}\n")
    if group_rows:
        print(table(group_rows, [Metric(*m) for m in GROUP_METRICS], "goal"))
        print(f"\nconsumer groups of one member, {where}\n")
    if connection_rows:
        print(table(connection_rows, [Metric(*m) for m in CONNECTION_METRICS], "goal"))
        print(f"\nidle connections beside one busy client, {where}\n")
    if cluster_rows:
        print(table(cluster_rows, [Metric(*m) for m in CLUSTER_METRICS], "goal"))
        print(f"\npartitions (RF 1, {args.per_topic} per topic) in 3 brokers on ZooKeeper "
              f"with a {SESSION_MS // 1000} s session, "
              + where.replace("one broker, ", ""))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "groups": group_rows,
                                         "connections": connection_rows, "cluster": cluster_rows,
                                         "load": load},
                                        indent=1))
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
