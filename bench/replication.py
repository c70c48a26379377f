"""Replication at speed and at size (issue 18): `python bench/replication.py [--quick]`.

Starts a 3-broker ZooKeeper cluster (odradek.testing's EmbeddedCluster: real child
processes, real ZooKeeper) and measures, on the same brokers:

- produce throughput of 1 KB records: RF 1 acks=1, RF 3 acks=1, RF 3 acks=all
  (librdkafka's rdkafka_performance, as bench/run.py uses; `odradek perf` without it);
- acks=all produce latency (send to acknowledgement) of 100 B records at a fixed rate
  (5,000 records/s): p50, p99, p99.9 (`odradek perf produce`, confluent-kafka);
- follower lag: after an acks=1 burst, how long until the high watermark reaches the
  log end, i.e. until every follower has fetched the burst;
- follower catch-up: one follower is stopped cleanly, a backlog is produced (acks=1)
  without it, and it is started again: the backlog's size over the time from its start
  until it is back in the ISR (it has fetched everything);

each on the fresh cluster, then again after adding idle RF 3 partitions (1,000 per
broker; `--idle 10000` for more). The table goes to stdout with the command and the
load average; `--json` writes the numbers too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import Client, ClientFailed, choose_client, run_tool

RECORD_SIZE = 1000
LATENCY_SIZE = 100
LATENCY_RATE = 5000


@dataclass
class Sizes:
    throughput_records: int
    latency_records: int
    lag_records: int
    backlog_records: int


FULL = Sizes(throughput_records=300_000, latency_records=50_000, lag_records=200_000,
             backlog_records=1_000_000)
QUICK = Sizes(throughput_records=60_000, latency_records=15_000, lag_records=50_000,
              backlog_records=200_000)


@dataclass
class Row:
    idle: int
    rf1_acks1_mb_s: float = 0.0
    rf3_acks1_mb_s: float = 0.0
    rf3_all_mb_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    lag_ms: float = 0.0
    catch_up_s: float = 0.0
    catch_up_mb_s: float = 0.0
    broker_cpu_s: dict[int, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.rf3_all_mb_s / self.rf1_acks1_mb_s if self.rf1_acks1_mb_s else 0.0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)




def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": "300000"})


def create_topics(cluster: Any, specs: list[tuple[str, int, int]], timeout: float = 600.0
                  ) -> None:
    """Create (name, partitions, rf) topics and wait until every partition has a leader
    that serves it (a ListOffsets answers)."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(cluster.bootstrap_servers)
    futures = admin.create_topics([NewTopic(n, p, r) for n, p, r in specs],
                                  request_timeout=timeout)
    for f in futures.values():
        f.result(timeout)
    deadline = time.monotonic() + timeout
    for name, partitions, _ in specs:
        while True:
            md = admin.list_topics(name, timeout=30).topics.get(name)
            if (md is not None and md.error is None and len(md.partitions) == partitions
                    and all(p.leader >= 0 and len(p.isrs) == len(p.replicas)
                            for p in md.partitions.values())):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"topic {name}: partitions without a leader or full ISR "
                                 f"after {timeout:.0f}s")
            time.sleep(0.5)


def _high_watermark(consumer: Any, topic: str) -> int:
    from confluent_kafka import TopicPartition

    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    return int(high)


def follower_lag_ms(bootstrap: str, topic: str, records: int) -> float:
    """acks=1 burst; ms from its last acknowledgement until the high watermark reaches
    the last acknowledged offset + 1 (every ISR follower has fetched it)."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": "5",
                         "batch.size": "1000000"})
    last = [-1]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            last[0] = max(last[0], msg.offset())

    payload = b"x" * RECORD_SIZE
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    acked = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lag"})
    try:
        deadline = acked + 120
        while _high_watermark(consumer, topic) < last[0] + 1:
            if time.monotonic() > deadline:
                raise ClientFailed("the followers did not catch up within 120 s")
            time.sleep(0.002)
        return (time.monotonic() - acked) * 1000
    finally:
        consumer.close()


def follower_catch_up(cluster: Any, client: Client, topic: str, records: int
                      ) -> tuple[float, float]:
    """Stop a follower of `topic`/0 cleanly, produce `records` 1 KB records without it
    (acks=1), start it again; (seconds from the start command until it is back in the
    ISR — its process start-up included —, MB/s of backlog over those seconds)."""
    leader = cluster.leader(topic)
    follower = next(n for n in cluster.alive() if n != leader)
    child = cluster.brokers[follower]
    child.stop()
    cluster.wait_for(lambda: follower not in cluster.isr(topic, node_id=leader) or None, 120,
                     f"broker {follower} to leave the ISR of {topic}")
    produced = client.produce(cluster.bootstrap_servers, topic, records, RECORD_SIZE, "1", 600)
    started = time.monotonic()  # its start-up counts: it may fetch before start returns
    child.start(120)
    # the leader's view: the restarted broker's own may be stale until it has caught up
    # with ZooKeeper (it showed the ISR from before its stop at once)
    cluster.wait_for(lambda: follower in cluster.isr(topic, node_id=leader) or None, 600,
                     f"broker {follower} to rejoin the ISR of {topic}")
    seconds = time.monotonic() - started
    return seconds, produced.records * RECORD_SIZE / 1e6 / seconds


def produce_latency(bootstrap: str, topic: str, records: int, rate: int) -> dict[str, float]:
    out = run_tool([sys.executable, "-m", "odradek.cli.perf", "produce",
                    "--bootstrap-server", bootstrap, "--topic", topic,
                    "--num-records", str(records), "--record-size", str(LATENCY_SIZE),
                    "--throughput", str(rate), "--timeout", "300", "--json",
                    "--producer-props", "acks=all"],
                   330)
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            data: dict[str, float] = json.loads(line)
            if data["errors"] or data["records"] < records:
                raise ClientFailed(f"latency run: {data}")
            return data
    raise ClientFailed("no JSON summary from odradek perf produce")


def measure(cluster: Any, client: Client, sizes: Sizes, idle: int, tag: str) -> Row:
    from bench.brokers import cpu_seconds

    bootstrap = cluster.bootstrap_servers
    row = Row(idle=idle)
    create_topics(cluster, [(f"rf1-{tag}", 1, 1), (f"rf3a-{tag}", 1, 3),
                            (f"rf3b-{tag}", 1, 3), (f"lat-{tag}", 1, 3),
                            (f"lag-{tag}", 1, 3), (f"catch-{tag}", 1, 3)])
    cpu_before = {n: sum(cpu_seconds(b.pid)) for n, b in _pids(cluster).items()}
    n, size = sizes.throughput_records, RECORD_SIZE
    row.rf1_acks1_mb_s = client.produce(bootstrap, f"rf1-{tag}", n, size, "1", 300).mb_per_s
    _log(f"  RF 1 acks=1   {row.rf1_acks1_mb_s:8.1f} MB/s")
    row.rf3_acks1_mb_s = client.produce(bootstrap, f"rf3a-{tag}", n, size, "1", 300).mb_per_s
    _log(f"  RF 3 acks=1   {row.rf3_acks1_mb_s:8.1f} MB/s")
    row.rf3_all_mb_s = client.produce(bootstrap, f"rf3b-{tag}", n, size, "all", 300).mb_per_s
    _log(f"  RF 3 acks=all {row.rf3_all_mb_s:8.1f} MB/s")
    lat = produce_latency(bootstrap, f"lat-{tag}", sizes.latency_records, LATENCY_RATE)
    row.p50_ms, row.p99_ms, row.p999_ms = lat["p50_ms"], lat["p99_ms"], lat["p999_ms"]
    _log(f"  acks=all latency p50 {row.p50_ms:.1f} p99 {row.p99_ms:.1f} "
         f"p99.9 {row.p999_ms:.1f} ms")
    row.lag_ms = follower_lag_ms(bootstrap, f"lag-{tag}", sizes.lag_records)
    _log(f"  follower lag after the burst {row.lag_ms:.0f} ms")
    row.catch_up_s, row.catch_up_mb_s = follower_catch_up(cluster, client, f"catch-{tag}",
                                                          sizes.backlog_records)
    _log(f"  follower catch-up {row.catch_up_s:.1f} s, {row.catch_up_mb_s:.0f} MB/s")
    row.broker_cpu_s = {n: round(sum(cpu_seconds(b.pid)) - cpu_before[n], 1)
                        for n, b in _pids(cluster).items()}
    return row


@dataclass
class _Pid:
    pid: int


def _pids(cluster: Any) -> dict[int, _Pid]:
    out = {}
    for node_id, child in cluster.brokers.items():
        if child.proc is not None:
            out[node_id] = _Pid(child.proc.pid)
    return out


def idle_cpu(cluster: Any, seconds: float = 5.0) -> dict[int, float]:
    """Each broker's share of a core while nothing is produced (fetchers polling)."""
    from bench.brokers import cpu_seconds

    before = {n: sum(cpu_seconds(b.pid)) for n, b in _pids(cluster).items()}
    time.sleep(seconds)
    return {n: round((sum(cpu_seconds(b.pid)) - before[n]) / seconds * 100, 1)
            for n, b in _pids(cluster).items()}


def table(rows: list[Row], idle_cpus: dict[int, dict[int, float]]) -> str:
    lines = ["| idle RF 3 partitions | RF 1 acks=1 MB/s | RF 3 acks=1 MB/s | "
             "RF 3 acks=all MB/s | all / RF 1 | acks=all p50 ms | p99 ms | p99.9 ms | "
             "follower lag ms | catch-up s | catch-up MB/s | idle CPU % per broker |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        cpu = idle_cpus.get(r.idle, {})
        lines.append(
            f"| {r.idle:,} | {r.rf1_acks1_mb_s:.0f} | {r.rf3_acks1_mb_s:.0f} | "
            f"{r.rf3_all_mb_s:.0f} | {r.ratio:.0%} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | "
            f"{r.p999_ms:.1f} | {r.lag_ms:.0f} | {r.catch_up_s:.1f} | "
            f"{r.catch_up_mb_s:.0f} | "
            f"{' / '.join(f'{v:.0f}' for v in cpu.values())} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (~2 min)")
    parser.add_argument("--idle", type=int, action="append",
                        help="idle RF 3 partitions per broker to add (repeatable; "
                             "default 1000; 0 measures the fresh cluster only)")
    parser.add_argument("--client", choices=("auto", "c", "py"), default="auto")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property for every broker (repeatable)")
    args = parser.parse_args(argv)
    from odradek.testing import EmbeddedCluster

    sizes = QUICK if args.quick else FULL
    idles = sorted({0, *(args.idle if args.idle is not None else [1000])})
    client = choose_client(args.client)
    config = dict(kv.split("=", 1) for kv in args.config)
    # Kafka's defaults for what the test defaults shorten (they keep fault tests quick)
    config.setdefault("replica.lag.time.max.ms", "30000")
    config.setdefault("replica.fetch.backoff.ms", "1000")
    config.setdefault("zookeeper.session.timeout.ms", "18000")
    rows: list[Row] = []
    idle_cpus: dict[int, dict[int, float]] = {}
    started = time.monotonic()
    with EmbeddedCluster(3, config=config) as cluster:
        added = 0
        for i, idle in enumerate(idles):
            if idle > added:
                _log(f"creating {idle - added:,} idle RF 3 partitions ...")
                t0 = time.monotonic()
                chunk = 100
                specs = [(f"idle-{idle}-{j}", min(chunk, idle - added - j * chunk), 3)
                         for j in range((idle - added + chunk - 1) // chunk)]
                create_topics(cluster, specs)
                _log(f"  created in {time.monotonic() - t0:.0f} s")
                added = idle
            _log(f"measuring with {idle:,} idle partitions per broker "
                 f"({client.name} client)")
            idle_cpus[idle] = idle_cpu(cluster)
            rows.append(measure(cluster, client, sizes, idle, str(i)))
    print()
    print(table(rows, idle_cpus))
    print()
    load = os.getloadavg()
    print(f"command: python bench/replication.py {' '.join(argv or sys.argv[1:])}".rstrip())
    print(f"3 brokers + ZooKeeper on {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
