"""The benchmark of issue 7: `python bench/run.py [--quick] [--rounds N] [--workloads ...]`.

Each round starts each broker in turn on loopback (odradek, the peer, the client-bound
limit; the order flips every round so that neither side always runs first), runs every
selected workload against it and stops it. The table shows per-workload medians over the
rounds, the ratios odradek/peer and odradek/limit and whether issue 7's goal is met.
Results go to bench/results/<time>/ (results.json, table.md, machine.txt).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fnmatch
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import tools
from bench.brokers import (
    BROKER_NAMES,
    Broker,
    BrokerFailed,
    odradek_broker,
    stop_all,
    tansu_broker,
)
from bench.clients import Client, ClientFailed, choose_client
from bench.report import (
    HEADER,
    BrokerRun,
    Results,
    Sample,
    failures,
    from_json,
    markdown,
    table_rows,
    to_json,
)
from bench.workloads import FULL, QUICK, Context, Sizes, Workload, all_workloads, run

ROOT = Path(__file__).resolve().parent.parent


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _select(patterns: list[str]) -> list[Workload]:
    every = all_workloads()
    if not patterns:
        return every
    wanted = [p for item in patterns for p in item.split(",") if p]
    chosen = [w for w in every if any(fnmatch.fnmatch(w.name, p) for p in wanted)]
    unknown = [p for p in wanted if not any(fnmatch.fnmatch(w.name, p) for w in every)]
    if unknown:
        raise SystemExit(f"no workload matches {unknown}; see --list")
    return chosen




def _brokers(names: list[str], workdir: Path, overrides: dict[str, str],
             results: Results, src: Path | None) -> list[Broker]:
    out: list[Broker] = []
    tansu: Path | None = None
    if {"peer", "limit"} & set(names):
        try:
            tansu = tools.ensure_tansu()
        except tools.ToolUnavailable as e:
            _log(f"! peer unavailable, running without peer and limit: {e}")
            for n in ("peer", "limit"):
                if n in names:
                    results.skipped[n] = str(e)
    for n in names:
        if n == "odradek":
            out.append(odradek_broker(workdir, overrides, src))
        elif n == "peer" and tansu:
            out.append(tansu_broker("peer", tansu, "memory://tansu/", workdir))
        elif n == "limit" and tansu:
            out.append(tansu_broker("limit", tansu, "null://sink", workdir))
    return out


def _machine(client: Client, brokers: list[Broker]) -> dict[str, str]:
    import confluent_kafka

    info = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": next((line.split(":", 1)[1].strip() for line in
                     Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), platform.processor()),
        "cores": str(os.cpu_count()),
        "memory": next((line.split(":", 1)[1].strip() for line in
                        Path("/proc/meminfo").read_text().splitlines()
                        if line.startswith("MemTotal")), "?"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "client": client.name,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        info["odradek"] = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
            text=True, timeout=10, check=False).stdout.strip()
    tansu = tools.cached_tansu()
    if tansu and any(b.name != "odradek" for b in brokers):
        with contextlib.suppress(tools.ToolUnavailable):
            info["peer"] = tools.tansu_version(tansu)
    return info


def _run_round(rnd: int, broker: Broker, workloads: list[Workload], client: Client,
               sizes: Sizes, results: Results) -> None:
    try:
        broker.start()
    except BrokerFailed as e:
        _log(f"! round {rnd} {broker.name} did not start: {e}")
        results.broker_runs.append(BrokerRun(rnd, broker.name, 0.0, 0, f"start: {e}"[:2000]))
        for w in workloads:
            if broker.name != "limit" or w.on_limit:
                results.samples.append(
                    Sample(rnd, broker.name, w.name, None, "broker did not start"))
        return
    ctx = Context(broker, client, sizes, filled=set())
    error: str | None = None
    try:
        for w in workloads:
            if broker.name == "limit" and not w.on_limit:
                continue
            if not broker.alive():  # died in the previous workload: go on with a new one
                broker.stop()
                broker.start()
                ctx.filled.clear()
            t0 = time.monotonic()
            try:
                metrics: dict[str, float] | None = run(ctx, w)
                err = None
            except ClientFailed as e:
                metrics, err = None, str(e)
            if not broker.alive():
                metrics = None
                err = (f"{err}; " if err else "") + (
                    f"broker exited with {broker.proc.returncode if broker.proc else '?'}: "
                    f"{broker.log_tail(1500)}")
            elif err and broker.name == "odradek":
                err += f"\n    broker log tail: {broker.log_tail(800)!r}"
            results.samples.append(Sample(rnd, broker.name, w.name, metrics, err,
                                          time.monotonic() - t0))
            shown = ", ".join(f"{k}={v:,.2f}" for k, v in (metrics or {}).items())
            _log(f"  r{rnd} {broker.name:8} {w.name:24} {shown or 'FAILED: ' + (err or '')[:300]}")
    except BrokerFailed as e:
        error = f"restart: {e}"[:2000]
    finally:
        peak = broker.peak_rss_mib()
        results.broker_runs.append(BrokerRun(rnd, broker.name, peak, broker.bytes_in, error))
        _log(f"  r{rnd} {broker.name:8} peak RSS {peak:,.0f} MiB after "
             f"{broker.bytes_in / 1e9:.2f} GB in")
        broker.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds through the finally blocks that stop the brokers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes and one round (the CI smoke run)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 1)")
    ap.add_argument("--workloads", nargs="*", default=[],
                    help="names or globs, e.g. 'produce-1KB-*' latency-fetchwait500")
    ap.add_argument("--brokers", default=",".join(BROKER_NAMES),
                    help="comma-separated subset of odradek,peer,limit")
    ap.add_argument("--client", choices=("auto", "c", "py"), default="auto",
                    help="load generator: librdkafka's C perf tool, odradek perf, or "
                    "C when it can be built (default)")
    ap.add_argument("--out", type=Path, default=None,
                    help="results directory (default bench/results/<time>)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where brokers keep data and logs (default bench/.cache/work-*, "
                    "removed at the end)")
    ap.add_argument("--odradek-override", action="append", default=[], metavar="K=V",
                    help="extra broker property for odradek; repeatable")
    ap.add_argument("--odradek-rev", default=None, metavar="REV",
                    help="run odradek as of this git revision (src/ exported to "
                    "bench/.cache/) rather than the work tree, which may change mid-run")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--report", type=Path, default=None, metavar="DIR",
                    help="print the table of an earlier run's DIR/results.json again "
                    "(and rewrite its table.md); measures nothing")
    args = ap.parse_args(argv)

    workloads = _select(args.workloads)
    if args.list:
        for w in workloads:
            print(w.name)
        return 0
    if args.report is not None:
        return _report_again(args.report)
    sizes = QUICK if args.quick else FULL
    rounds = args.rounds or (1 if args.quick else 3)
    if not 1 <= rounds <= 50:
        raise SystemExit("--rounds must be between 1 and 50")
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    if not names or set(names) - set(BROKER_NAMES):
        raise SystemExit(f"--brokers takes a subset of {','.join(BROKER_NAMES)}")
    overrides = dict(kv.split("=", 1) for kv in args.odradek_override)

    signal.signal(signal.SIGTERM, _on_sigterm)
    # Even when started with SIGINT ignored (a background job of a script), Ctrl-C stops
    # the run through the same cleanup.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit.register(stop_all)
    own_workdir = args.workdir is None
    # Not the system temp dir: it may be a tmpfs, where odradek's writes would cost nothing.
    tools.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    workdir = (Path(tempfile.mkdtemp(prefix="work-", dir=tools.CACHE_DIR)) if own_workdir
               else args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = args.out or ROOT / "bench" / "results" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    results = Results()
    interrupted = False
    brokers: list[Broker] = []
    machine = {"client": args.client, "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    try:
        client = choose_client(args.client)
        src: Path | None = None
        if args.odradek_rev and "odradek" in names:
            try:
                src, commit = tools.odradek_snapshot(args.odradek_rev, ROOT)
            except tools.ToolUnavailable as e:
                raise SystemExit(f"--odradek-rev {args.odradek_rev}: {e}") from e
        brokers = _brokers(names, workdir, overrides, results, src)
        machine = _machine(client, brokers)
        if src is not None:
            machine["odradek"] = f"{commit} (--odradek-rev {args.odradek_rev})"
        _log(f"bench: {rounds} round(s), {len(workloads)} workload(s), client {client.name}, "
             f"brokers {', '.join(b.name for b in brokers)}; load {machine['load']}")
        if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
            _log("! the machine is busy (load above half its cores): expect a wide spread; "
                 "compare the brokers only within this run")
        for rnd in range(1, rounds + 1):
            order = brokers if rnd % 2 else brokers[::-1]
            for broker in order:
                _run_round(rnd, broker, workloads, client, sizes, results)
    except KeyboardInterrupt:
        interrupted = True
        _log("! interrupted: stopping brokers, reporting what was measured")
    finally:
        stop_all()
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    machine["load_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    shown = [b.name for b in brokers]
    rows = table_rows(results, workloads, shown)
    table = markdown(table_rows(results, workloads, shown, spread=True))
    problems = failures(results)
    (out / "results.json").write_text(json.dumps(
        {"machine": machine, "rounds": rounds, "quick": args.quick,
         "workloads": [w.name for w in workloads], "brokers": shown,
         "table": [dict(zip(HEADER, r, strict=True)) for r in rows], **to_json(results)},
        indent=1))
    (out / "table.md").write_text(table)
    (out / "machine.txt").write_text("".join(f"{k}: {v}\n" for k, v in machine.items()))
    _print_table(rows, machine, rounds)
    if problems:
        print("\nFailures:")
        for p in problems:
            print(f"- {p}")
    if results.skipped:
        for b, why in results.skipped.items():
            print(f"\n{b} skipped: {why}")
    print(f"\nresults: {out}")
    if interrupted:
        return 130
    return 1 if any(s.error for s in results.samples if s.broker == "odradek") else 0


def _report_again(out: Path) -> int:
    data = json.loads((out / "results.json").read_text())
    by_name = {w.name: w for w in all_workloads()}
    workloads = [by_name[n] for n in data["workloads"] if n in by_name]
    results = from_json(data)
    rows = table_rows(results, workloads, data["brokers"])
    (out / "table.md").write_text(markdown(table_rows(results, workloads, data["brokers"],
                                                      spread=True)))
    _print_table(rows, data["machine"], data["rounds"])
    return 0


def _print_table(rows: list[list[str]], machine: dict[str, str], rounds: int) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"medians of {rounds} round(s), client {machine['client']}, "
                    f"load {machine['load']} → {machine['load_at_end']}")
    for i, h in enumerate(HEADER):
        t.add_column(h, justify="left" if i < 2 else "right", no_wrap=i < 2)
    for r in rows:
        t.add_row(*(c.replace("**", "") for c in r))
    Console(width=max(160, shutil.get_terminal_size().columns)).print(t)


if __name__ == "__main__":
    sys.exit(main())
