"""Records/s delivered and acknowledged through a share group of 1, 4 and 16
consumers, next to a consumer group reading the same topic.

One broker (`odradek broker`), one 1-partition topic of N records of 100 B produced
up front. Each share group is new and starts at the log start
(`share.auto.offset.reset=earliest`); its consumers are confluent-kafka ShareConsumers,
one thread each (librdkafka does the work off the GIL), in implicit acknowledgement
mode; the clock runs from their subscribe until every record was delivered (their
last acknowledgements are committed after the clock stops). librdkafka 2.16's
ShareConsumer.close() can hang when it closes right after joining (seen with 16
consumers: the leave heartbeat is answered, close never returns); consumers run in
daemon threads and a close still running after 30 s is counted, not waited for.
The consumer group row is one classic consumer reading the same N records from the
start (a 1-partition topic gives a consumer group one active member, whatever its
size), on a broker with `group.initial.rebalance.delay.ms=0` so that its join is not
the 3 s default wait.

    python -m bench.share_groups [--records 10000] [--consumers 1,4,16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.brokers import odradek_broker, stop_all

TIMEOUT_S = 300.0


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * 100
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def share_run(bootstrap: str, topic: str, n: int, consumers: int
              ) -> tuple[float, int, int]:
    """(seconds, records delivered with redeliveries, closes that hung)."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])]).values():
        f.result(30)
    lock = threading.Lock()
    seen: set[int] = set()
    delivered = [0]
    done = threading.Event()
    finished: list[float] = []
    deadline = time.monotonic() + TIMEOUT_S

    def work() -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        try:
            while not done.is_set() and time.monotonic() < deadline:
                batch = [m.offset() for m in c.poll(0.2) if m.error() is None]
                with lock:
                    delivered[0] += len(batch)
                    seen.update(batch)
                    if len(seen) >= n and not done.is_set():
                        finished.append(time.perf_counter())
                        done.set()
            c.commit_sync(30)
        finally:
            c.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=work, daemon=True) for _ in range(consumers)]
    for t in threads:
        t.start()
    done.wait(TIMEOUT_S)
    if len(seen) < n:
        raise RuntimeError(f"share group of {consumers}: {len(seen)}/{n} records delivered")
    elapsed = finished[0] - started
    close_by = time.monotonic() + 30
    for t in threads:
        t.join(max(close_by - time.monotonic(), 0))
    return elapsed, delivered[0], sum(t.is_alive() for t in threads)


def consumer_group_run(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cg-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    started = time.perf_counter()
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while got < n and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(1000, 0.2) if m.error() is None)
        c.commit(asynchronous=False)
    finally:
        c.close()
    if got < n:
        raise RuntimeError(f"consumer group: {got}/{n} records")
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(x) for x in args.consumers.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="bench-share-"))
    broker = odradek_broker(workdir, {"group.initial.rebalance.delay.ms": "0"})
    try:
        broker.start()
        topic = "bench-share"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        produce(broker.bootstrap, topic, args.records)
        rows: list[tuple[str, float, float, float]] = []
        cg = [consumer_group_run(broker.bootstrap, topic, args.records)
              for _ in range(args.repeat)]
        cg_median = statistics.median(cg)
        rows.append(("consumer group, 1 consumer", cg_median, min(cg), max(cg)))
        extra: dict[str, int] = {}
        hung: dict[str, int] = {}
        for k in sizes:
            runs = [share_run(broker.bootstrap, topic, args.records, k)
                    for _ in range(args.repeat)]
            times = [s for s, _, _ in runs]
            name = f"share group, {k} consumer{'s' if k > 1 else ''}"
            extra[name] = max(d for _, d, _ in runs) - args.records
            hung[name] = sum(h for _, _, h in runs)
            rows.append((f"share group, {k} consumer{'s' if k > 1 else ''}",
                         statistics.median(times), min(times), max(times)))
        load = os.getloadavg()
        print(f"\n{args.records} records of 100 B, 1 partition, medians of {args.repeat} "
              f"(load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})\n")
        print("| reader | records/s | (min..max) | vs consumer group | redelivered "
              "| closes hung |")
        print("|---|--:|--:|--:|--:|--:|")
        for name, median, lo, hi in rows:
            rate = args.records / median
            print(f"| {name} | {rate:,.0f} | ({args.records / hi:,.0f}.."
                  f"{args.records / lo:,.0f}) | {cg_median / median:.2f} | "
                  f"{extra.get(name, 0)} | {hung.get(name, 0)} |")
        print(f"\n    python -m bench.share_groups --records {args.records} "
              f"--consumers {args.consumers} --repeat {args.repeat}")
    finally:
        stop_all()


if __name__ == "__main__":
    main()
