"""What an ingest commit costs as a table's snapshots pile up, with and without `odradek
up`'s expiry bound.

    .venv/bin/python -m bench.lake_commit_cost [--commits 1000] [--every 50] [--kept 100]

Two tables get the same commits, alternately (so a busy machine slows both alike), made
like the lake writer's (a small append, the offsets in the summary and the table
property): `unbounded` never expires; `bounded` runs up's upkeep (the tables' expiry
properties: the newest `--kept` snapshots, age 0) every `--every` commits. Printed: the
median seconds of the last 20 commits of each at 20, 100, 400, ... commits. pyiceberg
copies the table metadata, snapshots included, on each commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--kept", type=int, default=100)
    args = parser.parse_args()

    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
    from odradek.pipeline.up import LakeKeeper, Progress, UpOptions
    from tests.pipeline.test_maintenance import TABLE, FakeIngest

    marks = sorted({m for m in (20, 100, 400, 700, 1000) if m <= args.commits}
                   | {args.commits})
    print(f"load average {os.getloadavg()[0]:.1f} at the start; median seconds of the "
          "last 20 commits", flush=True)
    print(f"{'commits':>8} {'unbounded':>10} {'bounded':>10}   snapshots", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        lakes = [LakeConfig.local(Path(tmp) / name) for name in ("unbounded", "bounded")]
        catalogs = [open_catalog(lake) for lake in lakes]
        ingests = [FakeIngest(c) for c in catalogs]
        keeper = LakeKeeper(lakes[1], UpOptions(retain_snapshots_s=0,
                                                snapshots_kept=args.kept), Progress())
        laps: list[list[float]] = [[], []]
        for i in range(1, args.commits + 1):
            for k, ingest in enumerate(ingests):
                t0 = time.perf_counter()
                ingest.commit(5)
                laps[k].append(time.perf_counter() - t0)
            if i % args.every == 0:
                keeper.expire_all(catalogs[1])
            if i in marks:
                snaps = [len(c.load_table(TABLE).metadata.snapshots) for c in catalogs]
                print(f"{i:>8} {statistics.median(laps[0][-20:]):>10.3f} "
                      f"{statistics.median(laps[1][-20:]):>10.3f}   {snaps[0]} / {snaps[1]}"
                      f"  (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
