"""`odradek share-groups`: list, describe, reset offsets, delete — as kafka-share-groups.sh.

confluent-kafka has no binding for the share group admin APIs yet, so these are the
raw requests Kafka's Admin client sends: ListGroups with the `share` type,
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups, each to the group's coordinator
(FindCoordinator). Watermarks for --to-earliest/--to-latest/--to-datetime come through
confluent-kafka.
"""

from __future__ import annotations

from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, console, fail, reported
from odradek.cli.groups import _table
from odradek.client import offsets, raw
from odradek.client import share_groups as share
from odradek.client.raw import error_name
from odradek.client.share_groups import (
    CLIENT_ID,
    TIMEOUT_S,
    coordinator,
    describe_group,
    offset_rows,
    share_groups,
)
from odradek.client.share_groups import address as _address

app = typer.Typer(no_args_is_help=True, help="Manage share groups (kafka-share-groups.sh).")


def with_lag(bootstrap: str, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return share.with_lag(client_config(bootstrap, []), rows)


@app.command("list")
def list_groups(
    state: bool = typer.Option(False, "--state", help="Show each group's state"),
    bootstrap: str = BootstrapOption,
) -> None:
    """List the share groups."""
    with reported():
        groups = share_groups(bootstrap)
        if state:
            _table(("GROUP", "STATE"), groups)
        else:
            for g, _ in groups:
                print(g)


def is_share_group(bootstrap: str, group: str) -> bool:
    """Whether the group's coordinator lists it as a share group."""
    r = raw.request(coordinator(bootstrap, group), 16, 5, CLIENT_ID, states_filter=(),
                    types_filter=("share",))
    return r.error_code == 0 and any(g.group_id == group for g in r.groups)


def lag_rows(bootstrap: str, group: str) -> tuple[bool, list[tuple[str, int, int, int]]]:
    """(has members, (topic, partition, start offset, lag) of each share-partition the
    group has state for)."""
    _, g = describe_group(bootstrap, group)
    rows = with_lag(bootstrap, offset_rows(bootstrap, group))
    return bool(g.members), [(t, p, start, lag) for _, t, p, _, start, lag in rows
                             if start is not None]


@app.command()
def describe(
    group: str = typer.Argument(..., help="Group id"),
    members: bool = typer.Option(False, "--members", help="One line per member"),
    state: bool = typer.Option(False, "--state", help="The group's state and coordinator"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Describe a share group with the columns kafka-share-groups --describe prints."""
    with reported():
        if state or members:
            where, g = describe_group(bootstrap, group)
            if state:
                _table(("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"),
                       [(group, f"{where[0]}:{where[1]}", g.group_state, len(g.members))])
                return
            names = _topic_names(bootstrap)
            _table(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
                   [(group, m.member_id, m.client_host, m.client_id,
                     sum(len(t.partitions) for t in m.assignment.topic_partitions),
                     ",".join(f"{names.get(t.topic_id, t.topic_name)}:"
                              f"{','.join(map(str, sorted(t.partitions)))}"
                              for t in m.assignment.topic_partitions) or "-")
                    for m in g.members])
            return
        rows = with_lag(bootstrap, offset_rows(bootstrap, group))
        _table(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"), rows)


def _topic_names(bootstrap: str) -> dict[Any, str]:
    md = raw.request(_address(bootstrap), 3, 12, CLIENT_ID, topics=None,
                     allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)
    return {t.topic_id: t.name for t in md.topics}


@app.command("reset-offsets")
def reset_offsets(
    group: str = typer.Argument(..., help="Group id"),
    topic: list[str] | None = typer.Option(None, "--topic", "-t",
                                           help="topic or topic:0,1 (repeatable)"),
    all_topics: bool = typer.Option(False, "--all-topics"),
    to_earliest: bool = typer.Option(False, "--to-earliest"),
    to_latest: bool = typer.Option(False, "--to-latest"),
    to_offset: int | None = typer.Option(None, "--to-offset"),
    to_datetime: str | None = typer.Option(None, "--to-datetime",
                                           help="YYYY-MM-DDTHH:mm:SS.sss (UTC)"),
    execute: bool = typer.Option(False, "--execute", help="Apply (default: --dry-run)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show (the default)"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Set a share group's start offsets; only while the group has no members."""
    if sum([to_earliest, to_latest, to_offset is not None, to_datetime is not None]) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if execute and dry_run:
        fail("--execute and --dry-run exclude each other")
    from confluent_kafka import Consumer, TopicPartition

    from odradek.cli.groups import _partitions

    with reported():
        if execute:
            _, g = describe_group(bootstrap, group)
            if g.members:
                fail(f"Share group '{group}' is not empty.")
        current = {(r[1], r[2]): r[4] for r in offset_rows(bootstrap, group)}
        probe = Consumer(client_config(bootstrap, ["group.id=odradek-share-groups-probe"]))
        try:
            tps = _partitions(probe, topic, all_topics, current)
            targets = offsets.targets(probe, tps, current, to_earliest, to_latest, to_offset,
                                      to_datetime, None, None)
            planned = {}
            for (t, p), offset in targets.items():
                low, high = probe.get_watermark_offsets(TopicPartition(t, p),
                                                        timeout=TIMEOUT_S)
                planned[(t, p)] = min(max(offset, low), high)
        finally:
            probe.close()
        _table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
               [(group, t, p, o) for (t, p), o in sorted(planned.items())])
        if not execute:
            if not dry_run:
                console.print("(dry run: add --execute to apply)")
            return
        s = raw.schema(91, 0)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in sorted(planned.items()):
            by_topic.setdefault(t, []).append((p, o))
        r = raw.request(coordinator(bootstrap, group), 91, 0, CLIENT_ID, group_id=group,
                        topics=tuple(s.AlterShareGroupOffsetsRequestTopic(
                            topic_name=t, partitions=tuple(
                                s.AlterShareGroupOffsetsRequestPartition(
                                    partition_index=p, start_offset=o) for p, o in parts))
                            for t, parts in by_topic.items()))
        if r.error_code:
            fail(f"Share group '{group}': {error_name(r.error_code)}")
        for t in r.responses:
            for p in t.partitions:
                if p.error_code:
                    fail(f"{t.topic_name}-{p.partition_index}: {error_name(p.error_code)}")


@app.command()
def delete(
    groups: list[str] = typer.Argument(..., help="Group ids"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete share groups and their state (they must have no members): DeleteGroups,
    as kafka-share-groups.sh --delete."""
    with reported():
        failed: dict[str, int] = {}
        for group in groups:
            r = raw.request(coordinator(bootstrap, group), 42, 2, CLIENT_ID,
                            groups_names=(group,))
            failed.update({g.group_id: int(g.error_code) for g in r.results
                           if g.error_code})
        if failed:
            fail("Deletion of some share groups failed:\n" + "\n".join(
                f"* Share group '{g}' could not be deleted due to: {error_name(code)}"
                for g, code in failed.items()))
        listed = ", ".join(f"'{g}'" for g in groups)
        console.print(f"Deletion of requested share groups ({listed}) was successful.")


@app.command("delete-offsets")
def delete_offsets(
    group: str = typer.Argument(..., help="Group id"),
    topic: list[str] = typer.Option(..., "--topic", "-t", help="Topic (repeatable)"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete a share group's state for whole topics (the group must have no members)."""
    with reported():
        results = _delete_offsets(bootstrap, group, topic)
        _table(("TOPIC", "STATUS"),
               [(t, "Successful" if code == 0 else f"Error: {error_name(code)}")
                for t, code in sorted(results.items())])
        if any(results.values()):
            raise typer.Exit(1)


def _delete_offsets(bootstrap: str, group: str, topics: list[str]) -> dict[str, int]:
    if not topics:
        return {}
    s = raw.schema(92, 0)
    r = raw.request(coordinator(bootstrap, group), 92, 0, CLIENT_ID, group_id=group,
                    topics=tuple(s.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                 for t in topics))
    if r.error_code:
        fail(f"Share group '{group}': {error_name(r.error_code)}")
    return {t.topic_name: int(t.error_code) for t in r.responses}
