"""`odradek health`: the cluster on one screen, with alarms — seeds 000 and 003.

What seed 000 says to watch for stability (partitions online and in sync, disk) and for
consumers (lag per group), and what seed 003 alarms on (shrinking ISR, leaders piled on
one broker, Burrow's lag status), read through the Kafka APIs any cluster answers:
Metadata and DescribeCluster (brokers, controller, leaders, ISR), DescribeLogDirs (disk
per log dir), ListGroups, DescribeGroups, OffsetFetch and ListOffsets (lag).

Three steps: `collect` asks the cluster, `assess` turns a view into alarms (pure, the
thresholds come from flags), `render` draws it. Exit code 0 when no alarm fired, 1 when
one did, 2 when the cluster could not be asked — so cron and CI can run it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import typer
from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from odradek.cli.common import (
    BOOTSTRAP_HELP,
    DEFAULT_BOOTSTRAP,
    client_config,
    console,
    error_text,
    fail,
)
from odradek.cli.signals import long_running
from odradek.client.health import (
    TIMEOUT_S,
    Alarm,
    ClusterView,
    Collector,
    Thresholds,
    assess,
    leader_balance,
)

# ---- render -------------------------------------------------------------------------

def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)  # not reached


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for c in columns:
        table.add_column(c, overflow="fold")  # a host or path cut with "…" is no use
    return table


def alarm_lines(alarms: Sequence[Alarm]) -> list[Text]:
    if not alarms:
        return [Text("healthy: no alarm", style="green")]
    return [Text(("ALARM " if a.fatal else "WARN  ") + a.text,
                 style="bold red" if a.fatal else "yellow") for a in alarms]


def render(view: ClusterView, alarms: Sequence[Alarm] | None) -> RenderableType:
    """The dashboard; with `alarms`, they end it (for --watch: one renderable)."""
    parts: list[RenderableType] = []
    offline = sum(p.offline for p in view.partitions)
    under = sum(1 for p in view.partitions if not p.offline and len(p.isr) < len(p.replicas))
    topics = len({p.topic for p in view.partitions})
    parts.append(Text.assemble(
        ("cluster ", "bold"), f"{view.cluster_id}  controller {view.controller}  "
        f"brokers {len(view.brokers)}  topics {topics}  partitions {len(view.partitions)}: "
        f"{len(view.partitions) - offline} online, ",
        (f"{under} under-replicated", "red" if under else ""), ", ",
        (f"{offline} offline", "red" if offline else ""),
        f"   ({time.strftime('%H:%M:%S', time.localtime(view.taken_at))})"))
    brokers = _table("BROKER", "HOST", "RACK", "LEADERS", "PREFERRED", "LED ELSEWHERE",
                     "REPLICAS", "")
    balance = leader_balance(view)
    for b in view.brokers:
        leads, preferred, elsewhere = balance.get(b.node_id, (0, 0, 0))
        replicas = sum(b.node_id in p.replicas for p in view.partitions)
        brokers.add_row(str(b.node_id), f"{b.host}:{b.port}", b.rack or "-", str(leads),
                        str(preferred), str(elsewhere), str(replicas),
                        "controller" if b.node_id == view.controller else "")
    parts += [Text(""), brokers]
    dirs = _table("BROKER", "LOG DIR", "USED", "OF", "PARTITIONS", "DATA", "STATUS")
    for d in view.log_dirs:
        used = d.used_pct
        dirs.add_row(str(d.broker), d.path, "-" if used is None else f"{used:.0f}%",
                     "-" if d.total_bytes < 0 else _bytes(d.total_bytes), str(d.partitions),
                     _bytes(d.size_bytes), Text(d.error or "online",
                                                style="red" if d.error else "green"))
    parts += [Text(""), dirs]
    groups = _table("GROUP", "STATE", "MEMBERS", "TOTAL LAG", "MAX LAG", "STATUS")
    for g in view.groups:
        style = {"OK": "green", "WARN": "yellow"}.get(g.status, "red")
        groups.add_row(g.group, g.state, str(g.members), str(g.total_lag), str(g.max_lag),
                       Text(g.status, style=style))
    parts += [Text(""), groups if view.groups else Text("no consumer groups")]
    if alarms is not None:
        parts += [Text(""), *alarm_lines(alarms)]
    return RichGroup(*parts)


# ---- the command --------------------------------------------------------------------

@long_running
def health(
    bootstrap: str = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap-server", "-b",
                                  help=BOOTSTRAP_HELP, envvar="ODRADEK_BOOTSTRAP_SERVER"),
    watch: bool = typer.Option(False, "--watch", "-w", help="Refresh until Ctrl-C"),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between lag samples "
                                   "(and between refreshes with --watch)"),
    samples: int = typer.Option(3, "--samples", help="Lag samples Burrow's evaluation "
                                "takes before a one-shot report"),
    max_lag: int | None = typer.Option(None, "--max-lag",
                                       help="Alarm when a group's total lag exceeds this"),
    min_isr_ratio: float = typer.Option(1.0, "--min-isr-ratio",
                                        help="Alarm when a partition's in-sync/replicas is "
                                        "below this (1.0: any shrunk ISR)"),
    max_disk_used_pct: float = typer.Option(85.0, "--max-disk-used-pct",
                                            help="Alarm when a log dir's disk is fuller"),
    max_leader_imbalance_pct: float = typer.Option(
        10.0, "--max-leader-imbalance-pct",
        help="Warn when more than this share of a broker's preferred partitions are led "
        "elsewhere"),
    timeout: float = typer.Option(TIMEOUT_S, "--timeout",
                                  help="Seconds to wait for the cluster's answers"),
) -> None:
    """One screen of cluster health: brokers, partitions, disks, groups' lag, alarms.

    Exit code 0 when no alarm fired, 1 when one did, 2 when the cluster did not answer.
    """
    limits = Thresholds(max_lag, min_isr_ratio, max_disk_used_pct, max_leader_imbalance_pct)
    try:
        collector = Collector(client_config(bootstrap), timeout=timeout)
        if watch:
            _watch(collector, limits, interval)
            return
        for i in range(max(samples, 1)):
            if i:
                time.sleep(interval)
            collector.sample_groups()
        view = collector.view()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except OSError as e:
        fail(str(e), code=2)
    except Exception as e:  # confluent-kafka's KafkaException: the cluster did not answer
        fail(error_text(e), code=2)
    alarms = assess(view, limits)
    console.print(render(view, None))
    console.print()
    for line in alarm_lines(alarms):  # whole lines, never wrapped: scripts grep them
        console.print(line, soft_wrap=True)
    raise typer.Exit(1 if any(a.fatal for a in alarms) else 0)


def _watch(collector: Collector, limits: Thresholds, interval: float) -> None:
    from rich.live import Live

    with Live(console=console, auto_refresh=False, screen=False) as live:
        while True:
            collector.sample_groups()
            view = collector.view()
            live.update(render(view, assess(view, limits)), refresh=True)
            time.sleep(interval)
