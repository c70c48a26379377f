"""`odradek groups`: list, describe, reset offsets, delete — as kafka-consumer-groups.sh.

Client-side work goes through confluent-kafka's AdminClient; OffsetDelete, which the
Python binding lacks, is sent as the one raw request it is.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, client_config, console, error_text, fail, reported
from odradek.client import offsets, raw
from odradek.client.raw import error_name

app = typer.Typer(no_args_is_help=True, help="Manage consumer groups (kafka-consumer-groups.sh).")

TIMEOUT_S = 30
CLIENT_ID = "odradek-groups"
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "CONSUMER-ID", "HOST", "CLIENT-ID")


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(bootstrap))


def _table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Plain aligned columns, as kafka-consumer-groups prints them (never cut to the
    terminal's width: scripts read this)."""
    cells = [list(columns)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


@app.command("list")
def list_groups(
    state: bool = typer.Option(False, "--state", help="Show each group's state"),
    bootstrap: str = BootstrapOption,
) -> None:
    """List the consumer groups."""
    with reported():
        client = admin(bootstrap)  # keep it: a collected client abandons its futures
        result = client.list_consumer_groups(request_timeout=TIMEOUT_S).result()
        groups = sorted(result.valid, key=lambda g: g.group_id)
        if state:
            _table(("GROUP", "STATE"), [(g.group_id, g.state.name.title()) for g in groups])
        else:
            for g in groups:
                print(g.group_id)


def describe_rows(bootstrap: str, group: str) -> tuple[Any, list[tuple[Any, ...]]]:
    """(the group's description, rows of COLUMNS) — committed offsets, log ends, lag."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    client = admin(bootstrap)
    desc = client.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result()
    offsets = client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)[group].result()
    owners: dict[tuple[str, int], Any] = {}
    for m in desc.members:
        for tp in m.assignment.topic_partitions if m.assignment else ():
            owners[(tp.topic, tp.partition)] = m
    committed = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
    keys = sorted(set(committed) | set(owners))
    probe = Consumer(client_config(bootstrap, ["group.id=odradek-groups-probe"]))
    rows = []
    try:
        for topic, partition in keys:
            _, high = probe.get_watermark_offsets(TopicPartition(topic, partition),
                                                  timeout=TIMEOUT_S)
            current = committed.get((topic, partition))
            current = None if current is None or current < 0 else current
            lag = None if current is None else max(high - current, 0)
            m = owners.get((topic, partition))
            rows.append((group, topic, partition, current, high, lag,
                         m.member_id if m else None, m.host if m else None,
                         m.client_id if m else None))
    finally:
        probe.close()
    return desc, rows


@app.command()
def describe(
    group: str = typer.Argument(..., help="Group id"),
    members: bool = typer.Option(False, "--members", help="One line per member"),
    state: bool = typer.Option(False, "--state", help="The group's state and coordinator"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Describe a group with the columns kafka-consumer-groups --describe prints."""
    with reported():
        desc, rows = describe_rows(bootstrap, group)
        if state:
            coordinator = desc.coordinator
            _table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                   [(group, f"{coordinator.host}:{coordinator.port} ({coordinator.id})",
                     desc.partition_assignor, desc.state.name.title(), len(desc.members))])
            return
        if members:
            _table(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"),
                   [(group, m.member_id, m.host, m.client_id,
                     len(m.assignment.topic_partitions) if m.assignment else 0)
                    for m in desc.members])
            return
        if not desc.members:
            console.print(f"Consumer group '{group}' has no active members.")
        _table(COLUMNS, rows)


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
    shift_by: int | None = typer.Option(None, "--shift-by"),
    by_duration: str | None = typer.Option(None, "--by-duration", help="e.g. PT10M"),
    from_file: Path | None = typer.Option(None, "--from-file",
                                          help="CSV of topic,partition,offset"),
    execute: bool = typer.Option(False, "--execute", help="Apply (default: --dry-run)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show (the default)"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Reset a group's committed offsets; only while the group has no active members."""
    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None,
              shift_by is not None, by_duration is not None, from_file is not None]
    if sum(chosen) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
             "--shift-by, --by-duration, --from-file")
    if execute and dry_run:
        fail("--execute and --dry-run exclude each other")
    with reported():
        bounded = plan_reset(bootstrap, group, topic, all_topics, to_earliest, to_latest,
                             to_offset, to_datetime, shift_by, by_duration, from_file, execute)
        _table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
               [(group, t, p, o) for (t, p), o in sorted(bounded.items())])
        if not execute:
            if not dry_run:
                console.print("(dry run: add --execute to apply)")
            return
        apply_reset(bootstrap, group, bounded)


def plan_reset(bootstrap: str, group: str, topic: list[str] | None, all_topics: bool,
               to_earliest: bool, to_latest: bool, to_offset: int | None,
               to_datetime: str | None, shift_by: int | None, by_duration: str | None,
               from_file: Path | None, execute: bool) -> dict[tuple[str, int], int]:
    """The offsets a reset would commit, clamped to each log's bounds; refused while the
    group has active members and the reset is to be executed."""
    from confluent_kafka import Consumer, TopicPartition

    desc, rows = describe_rows(bootstrap, group)
    if desc.members and execute:
        fail(f"Assignments can only be reset if the group '{group}' is inactive, but the "
             f"current state is {desc.state.name.title()}.")
    current = {(r[1], r[2]): r[3] for r in rows}
    probe = Consumer(client_config(bootstrap, ["group.id=odradek-groups-probe"]))
    try:
        if from_file is not None:
            with from_file.open() as f:
                targets = {(t, int(p)): int(o) for t, p, o in csv.reader(f)}
        else:
            tps = _partitions(probe, topic, all_topics, current)
            targets = offsets.targets(probe, tps, current, to_earliest, to_latest, to_offset,
                               to_datetime, shift_by, by_duration)
        bounded = {}
        for (t, p), offset in targets.items():
            low, high = probe.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT_S)
            bounded[(t, p)] = min(max(offset, low), high)
    finally:
        probe.close()
    return bounded


def apply_reset(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit the offsets for the group."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    client = admin(bootstrap)
    result = client.alter_consumer_group_offsets(
        [request], request_timeout=TIMEOUT_S)[group].result()
    for tp in result.topic_partitions:
        if tp.error is not None:
            fail(f"{tp.topic}-{tp.partition}: {error_text(tp.error)}")


def _partitions(consumer: Any, topics: list[str] | None, all_topics: bool,
                current: dict[tuple[str, int], Any]) -> list[tuple[str, int]]:
    if all_topics:
        names = sorted({t for t, _ in current})
        topics = names
    if not topics:
        fail("give --topic or --all-topics")
    out: list[tuple[str, int]] = []
    md = consumer.list_topics(timeout=TIMEOUT_S)
    for spec in topics:
        name, _, parts = spec.partition(":")
        if name not in md.topics:
            fail(f"topic {name} does not exist")
        chosen = [int(p) for p in parts.split(",")] if parts else sorted(md.topics[name].partitions)
        out.extend((name, p) for p in chosen)
    return out


@app.command()
def delete(
    groups: list[str] = typer.Argument(..., help="Group ids"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete groups (they must have no active members) and their offsets."""
    with reported():
        client = admin(bootstrap)
        futures = client.delete_consumer_groups(groups, request_timeout=TIMEOUT_S)
        for group, future in futures.items():
            try:
                future.result()
                console.print(f"Deletion of requested consumer groups ('{group}') was "
                              "successful.")
            except Exception as e:  # confluent-kafka raises KafkaException per group
                fail(f"{group}: {error_text(e)}")


@app.command("delete-offsets")
def delete_offsets(
    group: str = typer.Argument(..., help="Group id"),
    topic: list[str] = typer.Option(..., "--topic", "-t", help="topic or topic:0,1"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete a group's committed offsets for topics it no longer subscribes to."""
    from confluent_kafka import Consumer

    with reported():
        probe = Consumer(client_config(bootstrap, ["group.id=odradek-groups-probe"]))
        try:
            tps = _partitions(probe, topic, False, {})
        finally:
            probe.close()
        errors = _offset_delete(bootstrap, group, tps)
        _table(("TOPIC", "PARTITION", "STATUS"),
               [(t, p, "Successful" if code == 0 else f"Error: {error_name(code)}")
                for (t, p), code in sorted(errors.items())])
        if any(errors.values()):
            raise typer.Exit(1)


def _offset_delete(bootstrap: str, group: str, tps: list[tuple[str, int]]
                   ) -> dict[tuple[str, int], int]:
    """FindCoordinator, then OffsetDelete v0 to the coordinator (raw: no binding has it)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    found = raw.request((host, int(port)), 10, 1, CLIENT_ID, key=group, key_type=0)
    if found.error_code:
        fail(f"FindCoordinator: {error_name(found.error_code)}")
    s = raw.schema(47, 0)
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    response = raw.request((found.host, found.port), 47, 0, CLIENT_ID, group_id=group,
                           topics=tuple(s.OffsetDeleteRequestTopic(name=t, partitions=tuple(
                               s.OffsetDeleteRequestPartition(partition_index=p)
                               for p in parts)) for t, parts in by_topic.items()))
    if response.error_code:
        fail(f"{group}: {error_name(response.error_code)}")
    return {(t.name, p.partition_index): int(p.error_code)
            for t in response.topics for p in t.partitions}
