"""Lake maintenance at size: how long compaction and snapshot expiry take, and what a
reader gains, for a table after 1, 100 and 1,000 small ingest commits.

    .venv/bin/python -m bench.lake_maintenance [--batches 1,100,1000] [--rows 50]

Each commit appends `--rows` rows per topic (2 topics, one day: 2 partitions) the way the
lake writer commits (offsets in the summary and the table property). Printed per size:
files before/after, compaction and expiry seconds, and a full scan's seconds before and
after (what every reader pays).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,100,1000")
    parser.add_argument("--rows", type=int, default=50)
    args = parser.parse_args()

    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
    from odradek.pipeline.maintenance import compact, expire, table_size
    from tests.pipeline.test_maintenance import TABLE, FakeIngest

    print(f"load average {os.getloadavg()[0]:.1f}; {args.rows} rows per topic and commit")
    print(f"{'commits':>8} {'rows':>8} {'files':>6} {'→ files':>8} {'compact s':>10} "
          f"{'expire s':>9} {'scan s before':>14} {'scan s after':>13}")
    for n in (int(x) for x in args.batches.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            catalog = open_catalog(LakeConfig.local(Path(tmp) / "lake"))
            ingest = FakeIngest(catalog)
            for _ in range(n):
                ingest.commit(args.rows)
            before = table_size(catalog.load_table(TABLE))
            t0 = time.perf_counter()
            catalog.load_table(TABLE).scan().to_arrow()
            scan_before = time.perf_counter() - t0
            t0 = time.perf_counter()
            compact(catalog, TABLE)
            compact_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            expire(catalog, TABLE, dt.timedelta(0))
            expire_s = time.perf_counter() - t0
            after = table_size(catalog.load_table(TABLE))
            t0 = time.perf_counter()
            catalog.load_table(TABLE).scan().to_arrow()
            scan_after = time.perf_counter() - t0
            assert after.rows == before.rows
            print(f"{n:>8} {before.rows:>8} {before.files:>6} {after.files:>8} "
                  f"{compact_s:>10.2f} {expire_s:>9.2f} {scan_before:>14.2f} "
                  f"{scan_after:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
