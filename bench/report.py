"""Medians over rounds, the goals of issue 7, and the table (terminal and Markdown)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.workloads import SMALL, Workload


@dataclass
class Sample:
    round: int
    broker: str
    workload: str
    metrics: dict[str, float] | None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class BrokerRun:
    round: int
    broker: str
    peak_rss_mib: float
    bytes_in: int
    error: str | None = None


@dataclass
class Results:
    samples: list[Sample] = field(default_factory=list)
    broker_runs: list[BrokerRun] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # broker -> why


@dataclass(frozen=True)
class Cell:
    """The median of a (row, broker) over rounds, and how many rounds failed."""

    value: float | None
    failed: int
    rounds: int
    low: float | None = None
    high: float | None = None


Medians = dict[str, Cell]
Goal = Callable[[Medians], tuple[str, bool | None]]


@dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    label: str
    scale: float = 1.0  # shown value = metric * scale
    goal: Goal | None = None
    lower_is_better: bool = False


def _val(m: Medians, broker: str) -> float | None:
    c = m.get(broker)
    return None if c is None else c.value


def _judge(m: Medians, other: str | None, test: Callable[[float, float], bool]
           ) -> bool | None:
    """False when odradek failed every round; None when there is nothing to compare."""
    if "odradek" in m and m["odradek"].value is None:
        return False
    o = _val(m, "odradek")
    ref = _val(m, other) if other else 0.0
    return None if o is None or ref is None else test(o, ref)


def at_least_peer(m: Medians) -> tuple[str, bool | None]:
    return "≥ peer", _judge(m, "peer", lambda o, p: o >= p)


def at_most_peer(m: Medians) -> tuple[str, bool | None]:
    return "≤ peer", _judge(m, "peer", lambda o, p: o <= p)


def at_least_90pct_limit(m: Medians) -> tuple[str, bool | None]:
    return "≥ 90% of limit", _judge(m, "limit", lambda o, lim: o >= 0.9 * lim)


def under(bound: float, unit: str) -> Goal:
    def goal(m: Medians) -> tuple[str, bool | None]:
        return f"< {bound:g} {unit}", _judge(m, None, lambda o, _: o < bound)
    return goal


def rows_for(w: Workload) -> list[Row]:
    if w.kind in ("produce", "consume"):
        if w.record_size == SMALL:  # the client is the limit here: count records
            goal = at_least_90pct_limit if w.kind == "produce" else None
            throughput = Row(w.name, "msgs_per_s", "k msg/s", 1e-3, goal)
        else:
            throughput = Row(w.name, "mb_per_s", "MB/s", 1.0, at_least_peer)
        cpu = Row(w.name, "cpu_ms_per_mb", "broker CPU ms/MB", 1.0,
                  at_most_peer if w.kind == "produce" else None, lower_is_better=True)
        if w.kind == "produce":  # the page cache's cost, paid in the broker's system time
            kernel = Row(w.name, "sys_ms_per_mb", "broker kernel ms/MB", lower_is_better=True)
            return [throughput, cpu, kernel]
        return [throughput, cpu]
    if w.kind == "latency":
        p99_goal = under(10 if w.fetch_wait_ms <= 10 else 15, "ms")
        return [Row(w.name, "p50_ms", "p50 ms", lower_is_better=True),
                Row(w.name, "p99_ms", "p99 ms", goal=p99_goal, lower_is_better=True),
                Row(w.name, "p999_ms", "p99.9 ms", lower_is_better=True)]
    if w.kind == "deep-fetch":
        return [Row(w.name, "first_record_ms", "ms to first record", goal=under(5, "ms"),
                    lower_is_better=True)]
    if w.kind == "tail":
        return [Row(w.name, "cpu_pct", "broker CPU % of a core", lower_is_better=True),
                Row(w.name, "p99_ms", "p99 ms behind", lower_is_better=True)]
    return []


def medians(results: Results, row: Row, brokers: list[str]) -> Medians:
    out: Medians = {}
    for b in brokers:
        mine = [s for s in results.samples if s.broker == b and s.workload == row.workload]
        if not mine:
            continue
        ok = [s.metrics[row.metric] for s in mine if s.metrics and row.metric in s.metrics]
        out[b] = Cell(statistics.median(ok) if ok else None, len(mine) - len(ok), len(mine),
                      min(ok, default=None), max(ok, default=None))
    return out


def rss_medians(results: Results, brokers: list[str]) -> tuple[Medians, float]:
    out: Medians = {}
    gb = 0.0
    for b in brokers:
        runs = [r for r in results.broker_runs if r.broker == b]
        if runs:
            peaks = [r.peak_rss_mib for r in runs]
            out[b] = Cell(statistics.median(peaks), 0, len(runs), min(peaks), max(peaks))
            gb = max(gb, statistics.median(r.bytes_in for r in runs) / 1e9)
    return out, gb


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _fmt(cell: Cell | None, scale: float, spread: bool = False) -> str:
    if cell is None:
        return "—"
    if cell.value is None:
        return "FAIL"
    text = _num(cell.value * scale)
    if spread and cell.low is not None and cell.high is not None and cell.low != cell.high:
        text += f" ({_num(cell.low * scale)}..{_num(cell.high * scale)})"
    if cell.failed:
        text += f" ({cell.failed}/{cell.rounds} failed)"
    return text


def _ratio(m: Medians, a: str, b: str) -> str:
    x, y = _val(m, a), _val(m, b)
    if x is None or y is None or y == 0:
        return "—"
    return f"{x / y:.2f}"


def table_rows(results: Results, workloads: list[Workload], brokers: list[str],
               spread: bool = False) -> list[list[str]]:
    """Workload, metric, odradek, peer, limit, odradek/peer, odradek/limit, goal, met;
    with `spread`, each median is followed by the (lowest..highest) round."""
    out: list[list[str]] = []
    for w in workloads:
        for row in rows_for(w):
            m = medians(results, row, brokers)
            if not m:
                continue
            goal_text, ok = row.goal(m) if row.goal else ("", None)
            out.append([row.workload, row.label,
                        *(_fmt(m.get(b), row.scale, spread) for b in ("odradek", "peer", "limit")),
                        _ratio(m, "odradek", "peer"),
                        _ratio(m, "odradek", "limit"), goal_text,
                        "" if ok is None else ("yes" if ok else "**no**")])
    rss, gb = rss_medians(results, brokers)
    if rss:
        ok = None if _val(rss, "odradek") is None else (_val(rss, "odradek") or 0) < 200
        out.append([f"whole run ({gb:.2f} GB in)", "peak RSS MiB",
                    *(_fmt(rss.get(b), 1, spread) for b in ("odradek", "peer", "limit")),
                    _ratio(rss, "odradek", "peer"),
                    _ratio(rss, "odradek", "limit"), "< 200 MB",
                    "" if ok is None else ("yes" if ok else "**no**")])
    return out


HEADER = ["workload", "metric", "odradek", "peer", "limit", "odradek/peer", "odradek/limit",
          "goal", "met"]


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |",
             "|" + "|".join("---" if i < 2 else "--:" for i in range(len(HEADER))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def failures(results: Results) -> list[str]:
    out = [f"round {s.round} {s.broker} {s.workload}: {s.error}"
           for s in results.samples if s.error]
    out += [f"round {r.round} {r.broker}: {r.error}" for r in results.broker_runs if r.error]
    return out


def from_json(data: dict[str, Any]) -> Results:
    return Results([Sample(**s) for s in data["samples"]],
                   [BrokerRun(**r) for r in data["broker_runs"]], dict(data["skipped"]))


def to_json(results: Results) -> dict[str, Any]:
    return {
        "samples": [vars(s) for s in results.samples],
        "broker_runs": [vars(r) for r in results.broker_runs],
        "skipped": results.skipped,
    }
