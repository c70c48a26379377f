"""`odradek lag`: a group's lag judged by Burrow's rules over a sliding window of
`--window` samples (the rules, REWIND/STOP/STALL/WARN/OK/ERR, are odradek.client.lag's).

A share group's position is each share-partition's start offset and its lag the
records not yet delivered for good, as kafka-share-groups.sh --describe shows them.
"""

from __future__ import annotations

import time
from collections import deque

import typer
from rich.table import Table

from odradek.cli.common import BootstrapOption, console, reported
from odradek.cli.signals import long_running
from odradek.client.lag import Sample, evaluate_partition, group_status

app = typer.Typer(help="Evaluate a consumer or share group's lag as Burrow does.")


class LagWatcher:
    """Samples a group's committed offsets and log ends; keeps the last `window`."""

    def __init__(self, bootstrap: str, group: str, window: int) -> None:
        from odradek.cli.groups import describe_rows

        self._describe = describe_rows
        self.bootstrap = bootstrap
        self.group = group
        self.windows: dict[tuple[str, int], deque[Sample]] = {}
        self.size = window
        self.has_members = False
        self.share: bool | None = None  # a share group? asked at the first sample

    def sample(self) -> None:
        from odradek.cli import share_groups

        if self.share is None:
            self.share = share_groups.is_share_group(self.bootstrap, self.group)
        if self.share:
            self.has_members, shares = share_groups.lag_rows(self.bootstrap, self.group)
            now = time.time()
            for topic, partition, start, lag in shares:
                window = self.windows.setdefault((topic, partition), deque(maxlen=self.size))
                # the start offset is the position; what is left to deliver its lag
                window.append(Sample(now, start, start + lag))
            return
        desc, rows = self._describe(self.bootstrap, self.group)
        self.has_members = bool(desc.members)
        now = time.time()
        for _, topic, partition, current, log_end, *_ in rows:
            window = self.windows.setdefault((topic, partition), deque(maxlen=self.size))
            window.append(Sample(now, current, log_end))

    def report(self) -> tuple[str, int, int, list[tuple[str, int, int | None, str]]]:
        rows = []
        for (topic, partition), window in sorted(self.windows.items()):
            rows.append((topic, partition, window[-1].lag,
                         evaluate_partition(list(window), self.has_members)))
        lags = [lag for _, _, lag, _ in rows if lag is not None]
        return (group_status([s for *_, s in rows]), sum(lags), max(lags, default=0), rows)


def _print(group: str, report: tuple[str, int, int, list[tuple[str, int, int | None, str]]]
           ) -> None:
    status, total, biggest, rows = report
    console.print(f"group {group}: [bold]{status}[/bold]  total lag {total}  max lag {biggest}")
    table = Table(box=None, pad_edge=False, header_style="bold")
    for c in ("TOPIC", "PARTITION", "LAG", "STATUS"):
        table.add_column(c)
    for topic, partition, lag, s in rows:
        table.add_row(topic, str(partition), "-" if lag is None else str(lag), s)
    console.print(table)


@app.command()
@long_running
def lag(
    group: str = typer.Argument(..., help="Group id"),
    window: int = typer.Option(10, "--window", help="Samples in the sliding window"),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between samples"),
    samples: int = typer.Option(3, "--samples", help="Samples for a one-shot evaluation"),
    watch: bool = typer.Option(False, "--watch", help="Keep sampling and printing"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Evaluate GROUP's lag: OK, WARN, STOP, STALL, REWIND or ERR per partition."""
    with reported():
        watcher = LagWatcher(bootstrap, group, window)
        taken = 0
        while True:
            watcher.sample()
            taken += 1
            if watch:
                _print(group, watcher.report())
            elif taken >= samples:
                report = watcher.report()
                _print(group, report)
                raise typer.Exit(0 if report[0] == "OK" else 1 if report[0] == "WARN" else 2)
            time.sleep(interval)
