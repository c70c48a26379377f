"""Profile odradek under one benchmark workload: `python bench/profile.py [WORKLOAD ...]`.

Starts a fresh odradek, prepares what the workload reads (unprofiled), attaches py-spy
(`pip install py-spy` into the venv; it is not a dependency) for the measured part only,
and prints the functions with the most samples, by own time and by inclusive time. The
collapsed stacks stay in bench/results/profile-<time>/<workload>.txt for flame graphs
(e.g. speedscope or inferno).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import tools
from bench.brokers import die_with_parent, odradek_broker, stop_all
from bench.clients import choose_client
from bench.run import _select
from bench.workloads import FULL, QUICK, Context, run, source_of

ROOT = Path(__file__).resolve().parent.parent


_TRUNK = ("(<frozen runpy>)", "(typer/", "(asyncio/runners.py)", "(asyncio/base_events.py)",
          "(asyncio/events.py)", "(odradek/__main__.py)", "(odradek/cli/")


def _frame_name(frame: str) -> str:
    # py-spy's raw frames read "function (path/to/file.py:line)"; keep function and file.
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/site-packages/", "/src/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def summarize(collapsed: Path, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")
                  if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for f in set(frames):
            inclusive[f] += count
    if not total:
        return "no samples (the broker was idle, or py-spy could not attach)"
    # The trunk every busy sample shares (runpy, typer, the event loop) says nothing: leave
    # it out of the inclusive list.
    branches = collections.Counter({f: n for f, n in inclusive.items()
                                    if not any(t in f for t in _TRUNK)})
    lines = [f"{total} samples (busy only)", "", "own time:"]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines += ["", "inclusive time (below the event loop):"]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in branches.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("workloads", nargs="*", default=["produce-1KB-p1-acks1", "consume-1KB-p1"])
    ap.add_argument("--quick", action="store_true", help="the smoke run's tiny sizes")
    ap.add_argument("--client", choices=("auto", "c", "py"), default="auto")
    ap.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    ap.add_argument("--repeat", type=int, default=5,
                    help="measured runs per workload (one run is under a second)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists():
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy")
    sizes = QUICK if args.quick else FULL
    client = choose_client(args.client)
    out = args.out or ROOT / "bench" / "results" / time.strftime("profile-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    tools.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="profile-", dir=tools.CACHE_DIR))
    try:
        for w in _select(args.workloads):
            broker = odradek_broker(workdir)
            broker.start()
            try:
                ctx = Context(broker, client, sizes, filled=set())
                if w.kind == "consume":
                    run(ctx, source_of(w))
                stacks = out / f"{w.name}.txt"
                spy = subprocess.Popen(
                    [pyspy, "record", "--pid", str(broker.pid), "--rate", str(args.rate),
                     "--format", "raw", "--nonblocking", "--output", str(stacks)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    start_new_session=True, preexec_fn=die_with_parent)
                time.sleep(1.0)  # py-spy attaches
                try:
                    # Bounded: --repeat runs, each with its client's own time limit.
                    for _ in range(max(1, min(args.repeat, 100))):
                        metrics = run(ctx, w)
                finally:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        spy.wait(30)
                    if spy.poll() is None:
                        spy.kill()
                shown = ", ".join(f"{k}={v:,.2f}" for k, v in metrics.items())
                print(f"== {w.name}: {shown}\n")
                why = spy.stderr.read().decode(errors="replace") if spy.stderr else ""
                print(summarize(stacks, args.top) if stacks.exists() else
                      f"py-spy wrote nothing: {why}")
                print()
            finally:
                broker.stop()
    finally:
        stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"collapsed stacks: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
