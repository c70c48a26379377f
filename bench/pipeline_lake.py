"""End-to-end throughput: JSON events in a topic → the lake ingest job → an Iceberg table.

    .venv/bin/python -m bench.pipeline_lake [--records 1000000] [--per-batch 250000]
    .venv/bin/python -m bench.pipeline_lake --records 400000 --per-batch 200000 --compare 2

Fills a 2-partition topic with fleet telemetry (~150-byte JSON, a few malformed), runs the
ingest job with Trigger.AvailableNow and maxOffsetsPerTrigger=--per-batch, and prints rows/s
over the whole run (first batch's warm-up included) and over the batches after the first,
the CPU seconds Spark (its JVM and Python workers) spent per 100k rows after the first
batch (a measure of the work that the machine's other load disturbs less), and
the writer's laps per batch (median over the batches after the first).

With --compare N, the same topic is ingested 2N times into fresh tables in one Spark
session, alternating two ways of writing a batch (--paths):
- `lane` (the default): `no-lane` (every batch through Spark: variant parse, inference
  and Spark's Parquet writer, one pass where the table has columns) and `lane` (parsed
  by pyarrow and written as Parquet in the Spark tasks themselves; the default);
- `passes`: `two-pass` (every batch inferred in one pass, then projected and
  written, sorted by partition, in a second: the writer before issue 16) and `one-pass`
  (a batch for a table that has columns is written as the table expects while the same
  pass infers its schema), both without the lane;
- `quarantine`: `spark` (the bad records written by a Spark job of their own) and `driver`
  (collected by the inference pass and appended by the driver), without the lane.
The first batch of each run lands in a new table, so it always takes two passes; the
steady figure is the batches after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.pipeline_common import broker, fill_topic

PATHS = {"lane": ("no-lane", "lane"), "passes": ("two-pass", "one-pass"),
         "quarantine": ("spark", "driver")}
LAPS = ("lane", "infer", "quarantine", "write", "rewrite", "commit")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used by a process and its descendants, live or reaped: on a shared
    machine a steadier measure of a run's work than its wall time."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        # utime, stime, and the times of reaped children (no live process counts twice)
        times[int(entry.name)] = sum(int(x) for x in fields[11:15])
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def run_once(spark: Any, bootstrap: str, topic: str, work: Path, label: str,
             per_batch: int) -> dict[str, Any]:
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
    from odradek.pipeline.lake_writer import BatchResult

    lake = LakeConfig.local(work / label / "lake")
    done: list[tuple[float, float, BatchResult]] = []
    job = IngestJob(bootstrap=bootstrap, table="bench.events", lake=lake,
                    checkpoint=work / label / "ckpt", topics=[topic], available_now=True,
                    max_offsets_per_trigger=per_batch)
    jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    cpu = tree_cpu_seconds(jvm)
    started = time.perf_counter()
    query = start_ingest(spark, job, on_batch=lambda r: done.append(
        (time.perf_counter(), tree_cpu_seconds(jvm), r)))
    query.awaitTermination()
    total = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"ingest failed: {query.exception()}")
    rows = open_catalog(lake).load_table("bench.events").scan(
        selected_fields=("_offset",)).to_arrow().num_rows
    landed = sum(r.rows + r.quarantined for _, _, r in done)
    after_first = sum(r.rows + r.quarantined for _, _, r in done[1:])
    steady = after_first / (done[-1][0] - done[0][0]) if len(done) > 1 else None
    # Spark's CPU seconds per 100k rows in the batches after the first (else the whole run)
    cpu = ((done[-1][1] - done[0][1]) / after_first if len(done) > 1
           else (done[-1][1] - cpu) / max(landed, 1)) * 100_000
    later = [r for _, _, r in done[1:]] or [r for _, _, r in done]
    laps = {k: statistics.median(r.timings.get(k, 0.0) for r in later) for k in LAPS}
    return {"label": label, "batches": len(done), "rows": rows,
            "quarantined": sum(r.quarantined for _, _, r in done), "whole": landed / total,
            "total_s": total, "cpu_per_100k": cpu,
            "steady": steady, "laps": laps, "load": os.getloadavg()[0]}


def show(r: dict[str, Any]) -> None:
    laps = "  ".join(f"{k} {v:5.2f}s" for k, v in r["laps"].items())
    steady = f"{r['steady']:9,.0f}" if r["steady"] is not None else "        -"
    print(f"{r['label']:>10}  {r['batches']:3d} batches  {r['rows']:9,} rows  "
          f"{r['quarantined']:5,} quarantined  whole {r['whole']:9,.0f} rows/s  "
          f"steady {steady} rows/s  Spark CPU {r['cpu_per_100k']:5.2f}s/100k rows  "
          f"load {r['load']:4.1f}  | per batch: {laps}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--per-batch", type=int, default=250_000)
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--compare", type=int, default=0, metavar="N",
                        help="alternate the two paths N times each")
    parser.add_argument("--paths", choices=PATHS, default="lane",
                        help="which two paths --compare alternates")
    args = parser.parse_args()

    from odradek.pipeline.fleet import FleetConfig, FleetSimulator
    from odradek.pipeline.lake_writer import LakeWriter
    from odradek.pipeline.session import build_session

    sim = FleetSimulator(FleetConfig(firmware_update_after=None, malformed_share=0.001,
                                     start_ms=1_700_000_000_000, step_ms=10))
    values = [r.value for r in sim.records(20_000)]
    size = sum(map(len, values)) / len(values)
    work = Path(tempfile.mkdtemp(prefix="bench-lake-"))
    results: list[dict[str, Any]] = []
    try:
        with broker(args.bootstrap_server) as bootstrap:
            topic = f"bench-lake-{uuid.uuid4().hex[:6]}"
            secs = fill_topic(bootstrap, topic, values, args.records)
            print(f"produced {args.records:,} JSON events of ~{size:.0f} B in {secs:.1f}s")
            spark = build_session(app_name="bench-lake",
                                  extra={"spark.ui.showConsoleProgress": "false"})
            default_rows = LakeWriter.quarantine_collect_rows
            writers = spark.conf.get("spark.sql.maxConcurrentOutputFileWriters") or "0"
            pair = PATHS[args.paths]
            plan = (list(pair) * args.compare) if args.compare else ["run"]
            for i, path in enumerate(plan):
                LakeWriter.quarantine_collect_rows = 0 if path == "spark" else default_rows
                LakeWriter.one_pass = path != "two-pass"
                # the Spark paths are compared without the lane in front of them
                LakeWriter.arrow_lane = path in ("lane", "run")
                # two-pass is main before this change: its writes sorted by partition too
                spark.conf.set("spark.sql.maxConcurrentOutputFileWriters",
                               "0" if path == "two-pass" else writers)
                results.append(run_once(spark, bootstrap, topic, work, f"{path}-{i}",
                                        args.per_batch))
                show(results[-1])
            LakeWriter.quarantine_collect_rows = default_rows
            LakeWriter.one_pass = True
            LakeWriter.arrow_lane = True
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ingest, local[2], {args.records:,} records, {args.per_batch:,} per batch")
    for r in results:
        show(r)
    if args.compare:
        for path in PATHS[args.paths]:
            mine = [r for r in results if r["label"].startswith(path + "-")]
            laps = "  ".join(f"{k} {statistics.median(r['laps'][k] for r in mine):.2f}s"
                             for k in LAPS)
            s = [r["steady"] for r in mine if r["steady"] is not None]
            w = [r["whole"] for r in mine]
            c = [r["cpu_per_100k"] for r in mine]
            print(f"{path:>10}: median steady {statistics.median(s) if s else 0:,.0f} rows/s, "
                  f"whole run {statistics.median(w):,.0f} rows/s, Spark CPU "
                  f"{statistics.median(c):.2f}s/100k rows; laps per batch {laps}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
