"""Throughput of the `odradek` Spark source: rows/s into Spark's noop sink, Arrow vs rows.

    .venv/bin/python -m bench.pipeline_source [--records 2000000] [--bootstrap-server H:P]

Starts an odradek broker unless one is given, fills a 2-partition topic with ~100-byte
records, then reads it with `spark.read.format("odradek")` into `format("noop")` on
local[2], best of --repeat runs after one warm-up, once yielding Arrow record batches and
once yielding Python tuples.
"""

from __future__ import annotations

import argparse
import time
import uuid

from bench.pipeline_common import broker, fill_topic

VALUE = (b'{"device_id":"th-007","type":"climate","ts":"2026-11-22T10:00:00.000Z",'
         b'"temperature":21.5,"humidity":40}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap-server", default=None)
    args = parser.parse_args()

    from odradek.pipeline.session import build_session

    with broker(args.bootstrap_server) as bootstrap:
        topic = f"bench-source-{uuid.uuid4().hex[:6]}"
        secs = fill_topic(bootstrap, topic, [VALUE], args.records)
        print(f"produced {args.records:,} records of {len(VALUE)} B in {secs:.1f}s "
              f"({args.records / secs:,.0f}/s)")
        spark = build_session(app_name="bench-source",
                              extra={"spark.ui.showConsoleProgress": "false"})

        def run(arrow: bool) -> float:
            df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("arrow", str(arrow).lower()).load())
            started = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            return time.perf_counter() - started

        results = {}
        for arrow in (True, False):
            run(arrow)  # warm-up: Python workers, JIT
            best = min(run(arrow) for _ in range(args.repeat))
            results["arrow" if arrow else "rows"] = args.records / best
        spark.stop()
    print(f"source → noop, local[2], {args.records:,} records in 2 partitions:")
    for mode, rate in results.items():
        print(f"  {mode:5s} {rate:12,.0f} rows/s")


if __name__ == "__main__":
    main()
