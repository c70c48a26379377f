"""End-to-end throughput: JSON events in a topic → the lake ingest job → an Iceberg table.

    .venv/bin/python -m bench.pipeline_lake [--records 1000000] [--per-batch 250000]

Fills a 2-partition topic with fleet telemetry (~150-byte JSON, a few malformed), runs the
ingest job with Trigger.AvailableNow and maxOffsetsPerTrigger=--per-batch, and prints rows/s
over the whole run (first batch's warm-up included) and over the batches after the first.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.pipeline_common import broker, fill_topic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--per-batch", type=int, default=250_000)
    parser.add_argument("--bootstrap-server", default=None)
    args = parser.parse_args()

    from odradek.pipeline.fleet import FleetConfig, FleetSimulator
    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
    from odradek.pipeline.lake_writer import BatchResult
    from odradek.pipeline.session import build_session

    sim = FleetSimulator(FleetConfig(firmware_update_after=None, malformed_share=0.001,
                                     start_ms=1_700_000_000_000, step_ms=10))
    values = [r.value for r in sim.records(20_000)]
    size = sum(map(len, values)) / len(values)
    work = Path(tempfile.mkdtemp(prefix="bench-lake-"))
    try:
        with broker(args.bootstrap_server) as bootstrap:
            topic = f"bench-lake-{uuid.uuid4().hex[:6]}"
            secs = fill_topic(bootstrap, topic, values, args.records)
            print(f"produced {args.records:,} JSON events of ~{size:.0f} B in {secs:.1f}s")
            spark = build_session(app_name="bench-lake",
                                  extra={"spark.ui.showConsoleProgress": "false"})
            lake = LakeConfig.local(work / "lake")
            done: list[tuple[float, BatchResult]] = []
            job = IngestJob(bootstrap=bootstrap, table="bench.events", lake=lake,
                            checkpoint=work / "ckpt", topics=[topic], available_now=True,
                            max_offsets_per_trigger=args.per_batch)
            started = time.perf_counter()
            query = start_ingest(spark, job,
                                 on_batch=lambda r: done.append((time.perf_counter(), r)))
            query.awaitTermination()
            total = time.perf_counter() - started
            if query.exception() is not None:
                raise SystemExit(f"ingest failed: {query.exception()}")
            rows = open_catalog(lake).load_table("bench.events").scan(
                selected_fields=("_offset",)).to_arrow().num_rows
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    landed = sum(r.rows + r.quarantined for _, r in done)
    print(f"ingest, local[2], {len(done)} batches: {rows:,} rows in the table, "
          f"{sum(r.quarantined for _, r in done):,} quarantined")
    print(f"  whole run (with warm-up): {landed / total:12,.0f} rows/s ({total:.1f}s)")
    if len(done) > 1:
        steady = sum(r.rows + r.quarantined for _, r in done[1:])
        print(f"  after the first batch:    {steady / (done[-1][0] - done[0][0]):12,.0f} rows/s")


if __name__ == "__main__":
    main()
