"""Avro through the registry → Iceberg, next to the same events as JSON.

    .venv/bin/python -m bench.registry_lake [--records 200000] [--per-batch 100000]

Makes one set of sensor events (nested place record, enum, array, nullable double),
writes them to one topic as JSON and to another as Confluent-framed Avro (confluent-kafka's
AvroSerializer, schema registered in an odradek registry started for the run), then runs
the lake ingest job (Trigger.AvailableNow) on each in one Spark session and prints rows/s
for both: whole run, and after the first batch.

    .venv/bin/python -m bench.registry_lake --records 400000 --per-batch 200000 --compare 2

With --compare N, only the Avro topic is ingested, 2N times into fresh tables, alternating
the Spark path (`no-lane`: FramedDecoder's JSON, variant, Spark's writer) and the Arrow
lane (`lane`: decoded into Arrow columns and written in the tasks); each run also prints
the CPU seconds Spark (its JVM and Python workers) spent per 100k rows after the first
batch, and the medians per path at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pipeline_common import broker, fill_topic
from bench.pipeline_lake import tree_cpu_seconds
from bench.registry_bench import start_registry

SCHEMA = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [
    {"name": "device_id", "type": "string"},
    {"name": "ts", "type": "long"},
    {"name": "place", "type": {"type": "record", "name": "Place", "fields": [
        {"name": "site", "type": "string"}, {"name": "floor", "type": "int"}]}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["TEMP", "HUM"]}},
    {"name": "value", "type": ["null", "double"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}


def events(n: int) -> list[dict[str, object]]:
    return [{"device_id": f"dev-{i % 500}", "ts": 1_700_000_000_000 + i * 10,
             "place": {"site": ["oslo", "rome", "lima"][i % 3], "floor": i % 7},
             "kind": "TEMP" if i % 2 else "HUM", "value": None if i % 50 == 0 else i / 7,
             "tags": ["a", "b"][: i % 3]} for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--per-batch", type=int, default=100_000)
    parser.add_argument("--compare", type=int, default=0, metavar="N",
                        help="ingest the Avro topic N times each without and with the lane")
    args = parser.parse_args()

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from odradek.pipeline.ingest import IngestJob, start_ingest
    from odradek.pipeline.lake_catalog import LakeConfig
    from odradek.pipeline.lake_writer import BatchResult, LakeWriter
    from odradek.pipeline.session import build_session

    sample = events(20_000)
    work = Path(tempfile.mkdtemp(prefix="bench-registry-lake-"))
    registry: subprocess.Popen[bytes] | None = None
    results: dict[str, list[tuple[float, float, float]]] = {}
    try:
        with broker(None) as bootstrap:
            registry, url = start_registry(bootstrap, work)
            tag = uuid.uuid4().hex[:6]
            json_topic, avro_topic = f"bench-json-{tag}", f"bench-avro-{tag}"
            serialize = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(SCHEMA))
            ctx = SerializationContext(avro_topic, MessageField.VALUE)
            avro_values = [serialize(e, ctx) or b"" for e in sample]
            json_values = [json.dumps(e, separators=(",", ":")).encode() for e in sample]
            for name, topic, values in (("JSON", json_topic, json_values),
                                        ("Avro", avro_topic, avro_values)):
                size = sum(map(len, values)) / len(values)
                secs = fill_topic(bootstrap, topic, values, args.records)
                print(f"produced {args.records:,} {name} events of ~{size:.0f} B in {secs:.1f}s")
            spark = build_session(app_name="bench-registry-lake",
                                  extra={"spark.ui.showConsoleProgress": "false"})
            runs: list[tuple[str, str, str | None]] = [
                ("JSON", json_topic, None), ("Avro via the registry", avro_topic, url)]
            if args.compare:
                runs = [(label, avro_topic, url)
                        for _ in range(args.compare) for label in ("no-lane", "lane")]
            jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
            for i, (name, topic, registry_url) in enumerate(runs):
                LakeWriter.arrow_lane = name != "no-lane"
                done: list[tuple[float, float, BatchResult]] = []
                table = f"bench.{topic.replace('-', '_')}_{i}"
                job = IngestJob(bootstrap=bootstrap, table=table,
                                lake=LakeConfig.local(work / "lake"),
                                checkpoint=work / f"ckpt-{topic}-{i}", topics=[topic],
                                available_now=True, max_offsets_per_trigger=args.per_batch,
                                schema_registry=registry_url)
                started = time.perf_counter()
                query = start_ingest(spark, job, on_batch=lambda r, d=done: d.append(
                    (time.perf_counter(), tree_cpu_seconds(jvm), r)))
                query.awaitTermination()
                total = time.perf_counter() - started
                if query.exception() is not None:
                    raise SystemExit(f"ingest failed: {query.exception()}")
                landed = sum(r.rows for _, _, r in done)
                bad = sum(r.quarantined for _, _, r in done)
                took = sum("lane" in r.timings and "write" not in r.timings
                           for _, _, r in done)
                line = f"{name:<22} {landed:,} rows ({bad} quarantined, {took}/{len(done)} " \
                       f"batches by the lane): {landed / total:10,.0f} rows/s whole run"
                if len(done) > 1:
                    steady = sum(r.rows + r.quarantined for _, _, r in done[1:])
                    rate = steady / (done[-1][0] - done[0][0])
                    cpu = (done[-1][1] - done[0][1]) / steady * 100_000
                    gaps = [b[0] - a[0] for a, b in itertools.pairwise(done)]
                    laps = {k: statistics.median(r.timings.get(k, 0.0) for _, _, r in done[1:])
                            for k in ("lane", "infer", "write", "commit")}
                    line += f", {rate:10,.0f} rows/s after the first batch, Spark CPU " \
                            f"{cpu:.2f}s/100k rows; per batch after the first: " \
                            f"{statistics.median(gaps):.2f}s, laps " + \
                            " ".join(f"{k} {v:.2f}s" for k, v in laps.items() if v)
                    results.setdefault(name, []).append((landed / total, rate, cpu))
                print(line, flush=True)
            LakeWriter.arrow_lane = True
            spark.stop()
        for name, seen in results.items():
            print(f"{name:>10}: median whole run {statistics.median(w for w, _, _ in seen):,.0f}"
                  f" rows/s, after the first batch {statistics.median(s for _, s, _ in seen):,.0f}"
                  f" rows/s, Spark CPU {statistics.median(c for _, _, c in seen):.2f}s/100k rows")
    finally:
        if registry is not None:
            registry.send_signal(signal.SIGTERM)
            registry.wait(20)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
