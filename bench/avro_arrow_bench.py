"""Avro bodies → Arrow columns: avro_arrow.decode_bodies next to fastavro + from_pylist.

    .venv/bin/python -m bench.avro_arrow_bench [--bodies 200000] [--rounds 5]

The bench record of bench/registry_lake.py (string, long, nested record, enum, nullable
double, array of strings), schemaless bodies as the lake's Arrow lane gets them (an Arrow
binary column) and as a Python list. Prints records/s per CPU second (process time, all
threads) and per wall second, best of the rounds, both ways in one run so load cancels.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry_lake import SCHEMA, events


def measure(label: str, n: int, rounds: int, run: Callable[[], Any]) -> None:
    run()  # warm up (imports, schema parsing)
    cpu, wall = [], []
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        run()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    print(f"{label:44s} {n / min(cpu):>12,.0f} rec/s per CPU s   "
          f"{n / min(wall):>12,.0f} rec/s wall   ({min(cpu) * 1000:.0f} ms CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import fastavro
    import pyarrow as pa

    from odradek.pipeline.avro_arrow import plan
    from odradek.pipeline.schema_mapping import avro_type

    parsed = fastavro.parse_schema(SCHEMA)
    bodies = []
    for e in events(args.bodies):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, e)
        bodies.append(out.getvalue())
    column = pa.array(bodies, pa.binary())
    target = avro_type(SCHEMA)
    arrow_schema = plan(SCHEMA, target).decode(bodies[:1])[0].schema  # the lake's types

    def baseline() -> pa.Table:
        rows = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies]
        return pa.Table.from_pylist(rows, schema=arrow_schema)

    decoder = plan(SCHEMA, target, schema_id=1)
    print(f"{args.bodies:,} bodies of ~{sum(map(len, bodies)) / len(bodies):.0f} B")
    measure("fastavro per record + Table.from_pylist", args.bodies, max(1, args.rounds // 2),
            baseline)
    measure("decode_bodies (Arrow binary column)", args.bodies, args.rounds,
            lambda: decoder.decode(column))
    measure("decode_bodies (list of bytes)", args.bodies, args.rounds,
            lambda: decoder.decode(bodies))


if __name__ == "__main__":
    main()
