"""Page latency of the web console on a cluster of 1,000 partitions and 50 groups.

`python bench/console_pages.py [--topics 20] [--partitions 50] [--groups 50] [--rounds 10]`

Starts an odradek broker and `odradek console` as child processes, creates the topics
(topics x partitions), writes a few records to every partition, commits offsets for
each group on one topic, waits until the console has sampled it all, then times every
page over HTTP (after two warm-up loads) and prints median, p90 and max per page. The
issue's bar: every page under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import free_port, odradek_broker

BAR_MS = 300.0


def setup_cluster(bootstrap: str, topics: int, partitions: int, groups: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-{i:02d}" for i in range(topics)]
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names],
                                      request_timeout=60).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for name in names:
        for p in range(partitions):
            for i in range(5):
                producer.produce(name, value=json.dumps({"i": i, "p": p}).encode(),
                                 key=f"k{i}".encode(), partition=p)
    producer.flush(60)
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-group-{g:02d}",
                             "enable.auto.commit": False})
        topic = names[g % len(names)]
        consumer.commit(offsets=[TopicPartition(topic, p, 2) for p in range(partitions)],
                        asynchronous=False)
        consumer.close()
    return names


def fetch_ms(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
        if r.status != 200:
            raise RuntimeError(f"{url}: HTTP {r.status}")
    return (time.perf_counter() - start) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", type=Path, help="Also write the results here")
    args = ap.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="console-bench-"))
    broker = odradek_broker(workdir)
    console: subprocess.Popen[bytes] | None = None
    try:
        broker.start()
        t0 = time.monotonic()
        names = setup_cluster(broker.bootstrap, args.topics, args.partitions, args.groups)
        print(f"{args.topics * args.partitions} partitions, {args.groups} groups set up in "
              f"{time.monotonic() - t0:.1f}s")
        port = free_port()
        console = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "-b", broker.bootstrap, "--port",
             str(port), "--lake-catalog-uri", f"sqlite:///{workdir / 'none.db'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:  # up, and every group sampled
            try:
                with urllib.request.urlopen(base + "/groups", timeout=30) as r:
                    if r.read().count(b'href="/groups/bench-group-') >= args.groups:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the console did not show every group within 120s")
            time.sleep(0.5)
        pages = ["/", "/topics", f"/topics/{names[0]}",
                 f"/topics/{names[0]}/messages?partition=0", "/topics/bench-00/messages",
                 "/groups", "/groups/bench-group-00", "/groups/bench-group-00?strategy=earliest",
                 "/brokers", "/transactions", "/health", "/lake"]
        results = {}
        print(f"{'page':45} {'median':>8} {'p90':>8} {'max':>8}")
        for page in pages:
            for _ in range(2):
                fetch_ms(base + page)
            times = sorted(fetch_ms(base + page) for _ in range(args.rounds))
            p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
            results[page] = {"median_ms": statistics.median(times), "p90_ms": p90,
                             "max_ms": times[-1]}
            flag = "" if statistics.median(times) < BAR_MS else "  > 300 ms"
            print(f"{page:45} {statistics.median(times):8.1f} {p90:8.1f} {times[-1]:8.1f}"
                  f"{flag}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        slow = [p for p, r in results.items() if r["median_ms"] >= BAR_MS]
        print("all pages under 300 ms (median)" if not slow else f"slow: {', '.join(slow)}")
        return 0 if not slow else 1
    finally:
        if console is not None and console.poll() is None:
            os.killpg(console.pid, signal.SIGTERM)
            console.wait(20)
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
