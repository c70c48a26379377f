"""Throughput of the `odradek` Spark source: rows/s into Spark's noop sink, and where the CPU goes.

    PYTHONPATH=$PWD/src .venv/bin/python -m bench.pipeline_source [--records 2000000]
        [--modes arrow,rows] [--src DIR ...] [--rounds 1] [--bootstrap-server H:P]

Starts an odradek broker unless one is given, fills a 2-partition lz4 topic with ~100-byte
records, then reads it with `spark.read.format("odradek")` into `format("noop")` on
local[2], best of --repeat runs after one warm-up, per mode (Arrow record batches, Python
tuples). Each Spark session runs in a child process, so `--src A --src B` compares two
source trees (say a checkout of main and this one) on the same broker and topic, taking
turns for --rounds rounds so the machine's load falls on both alike. Next to rows/s the
table shows CPU µs per row by process and thread kind (cores are shared by all of them:
at 2 cores, 1 µs/row of total CPU is the 2 M rows/s budget).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.brokers import odradek_broker
from bench.pipeline_common import fill_topic

VALUE = (b'{"device_id":"th-007","type":"climate","ts":"2026-11-22T10:00:00.000Z",'
         b'"temperature":21.5,"humidity":40}')
SHORT = {"worker python": "py", "worker librdkafka": "rdkafka", "jvm tasks": "jvm-task",
         "jvm gc": "jvm-gc", "jvm jit": "jvm-jit", "jvm other": "jvm-other",
         "broker": "broker", "driver python": "driver"}


def child(args: argparse.Namespace) -> None:
    """One Spark session against the given topic; prints one JSON line per mode."""
    from bench.cpu_split import CpuSplit, busy_cores, find_jvm
    from odradek.pipeline.session import build_session

    conf = dict(kv.split("=", 1) for kv in args.conf)
    spark = build_session(app_name="bench-source",
                          extra={"spark.ui.showConsoleProgress": "false", **conf})
    split = CpuSplit(find_jvm(), broker_pid=args.broker_pid)
    options = dict(kv.split("=", 1) for kv in args.option)

    def run(arrow: bool) -> tuple[float, dict[str, float], float]:
        reader = (spark.read.format("odradek")
                  .option("kafka.bootstrap.servers", args.bootstrap_server)
                  .option("subscribe", args.topic).option("arrow", str(arrow).lower()))
        for k, v in options.items():
            reader = reader.option(k, v)
        df = reader.load()
        busy0, all0 = busy_cores()
        with split.measure():
            started = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            wall = time.perf_counter() - started
        busy1, all1 = busy_cores()
        return wall, dict(split.seconds), (busy1 - busy0) / max(all1 - all0, 1.0)

    for mode in args.modes.split(","):
        arrow = mode == "arrow"
        for _ in range(args.warmup):
            run(arrow)  # warm-up: Python workers, the JIT
        best = min((run(arrow) for _ in range(args.repeat)), key=lambda r: r[0])
        wall, seconds, busy = best
        print("RESULT " + json.dumps({
            "mode": mode, "rows_per_s": args.records / wall, "wall": wall,
            "busy": busy, "us_per_row": {k: v * 1e6 / args.records
                                         for k, v in seconds.items()}}), flush=True)
    spark.stop()


def run_child(src: Path, args: argparse.Namespace, bootstrap: str, topic: str,
              broker_pid: int | None) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "bench.pipeline_source", "--child",
           "--bootstrap-server", bootstrap, "--topic", topic, "--records", str(args.records),
           "--repeat", str(args.repeat), "--modes", args.modes,
           "--warmup", str(args.warmup),
           "--broker-pid", str(broker_pid or 0)]
    for kv in args.conf:
        cmd += ["--conf", kv]
    for kv in args.option:
        cmd += ["--option", kv]
    # The bench package comes from this tree; odradek (and so the Spark workers) from src.
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(__file__).parent.parent}"}
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
    return [json.loads(line[len("RESULT "):]) for line in out.splitlines()
            if line.startswith("RESULT ")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first")
    parser.add_argument("--modes", default="arrow,rows")
    parser.add_argument("--src", action="append", type=Path, default=[],
                        help="odradek source tree to measure (repeat to compare); "
                             "default: the one on PYTHONPATH")
    parser.add_argument("--conf", action="append", default=[], help="Spark conf k=v")
    parser.add_argument("--option", action="append", default=[], help="source option k=v")
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--topic", default=None, help="read this filled topic (with --child)")
    parser.add_argument("--broker-pid", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    import odradek
    srcs = [p.resolve() for p in args.src] or [Path(odradek.__file__).parent.parent]

    with contextlib.ExitStack() as stack:
        broker_pid = None
        bootstrap = args.bootstrap_server
        if not bootstrap:
            own = odradek_broker(Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="pipeline-bench-"))))
            own.start()
            stack.callback(own.stop)
            bootstrap, broker_pid = own.bootstrap, own.pid
        topic = f"bench-source-{uuid.uuid4().hex[:6]}"
        secs = fill_topic(bootstrap, topic, [VALUE], args.records)
        print(f"produced {args.records:,} records of {len(VALUE)} B (lz4) in {secs:.1f}s "
              f"({args.records / secs:,.0f}/s)", flush=True)
        rows: list[tuple[str, dict[str, Any]]] = []
        for rnd in range(args.rounds):
            for src in srcs:
                for result in run_child(src, args, bootstrap, topic, broker_pid):
                    rows.append((str(src), result))
                    print(f"round {rnd + 1} {src}: {result['mode']} "
                          f"{result['rows_per_s']:,.0f} rows/s", flush=True)

    print(f"\nsource → noop, local[2], {args.records:,} records in 2 partitions "
          f"(best of {args.repeat} per round; CPU µs/row of that run)")
    kinds = list(SHORT)
    print(f"{'src':28s} {'mode':5s} {'rows/s':>10s} {'busy':>5s} "
          + " ".join(f"{SHORT[k]:>9s}" for k in kinds) + f" {'total':>7s}")
    for src, r in rows:
        us = r["us_per_row"]
        print(f"{src[-28:]:28s} {r['mode']:5s} {r['rows_per_s']:10,.0f} {r['busy']:5.0%} "
              + " ".join(f"{us.get(k, 0.0):9.3f}" for k in kinds)
              + f" {sum(us.values()):7.3f}")
    print("\nreproduce: PYTHONPATH=$PWD/src .venv/bin/python -m bench.pipeline_source "
          + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
