"""`odradek delete-records`: Kafka's kafka-delete-records.sh.

Moves partitions' log start offsets: every record below the given offset becomes
unreadable at once, and its segments are deleted. The partitions come from a JSON file
in the tool's format

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 3}], "version": 1}

(offset -1: up to the high watermark, i.e. everything), or from `--topic`,
`--partition` (repeatable; default: every partition) and `--offset`. Output and exit
status follow Kafka's tool: one line per partition with its new low watermark, or its
error; exit 1 if any partition failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, error_text, fail, reported
from odradek.cli.topics import TIMEOUT_S, admin


def parse_offset_json(text: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of each entry of kafka-delete-records.sh's JSON."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the offset JSON file is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError('the offset JSON file needs {"partitions": [...], "version": 1}')
    if doc.get("version", 1) != 1:
        raise ValueError(f"unsupported offset JSON version {doc.get('version')}")
    out: list[tuple[str, int, int]] = []
    seen: set[tuple[str, int]] = set()
    for entry in doc["partitions"]:
        try:
            topic, partition, offset = entry["topic"], int(entry["partition"]), int(entry["offset"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"malformed partition entry {entry!r}: needs topic, partition "
                             "and offset") from None
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"malformed topic in {entry!r}")
        if (topic, partition) in seen:
            raise ValueError(f"offset JSON names {topic}-{partition} twice")
        seen.add((topic, partition))
        out.append((topic, partition, offset))
    if not out:
        raise ValueError("the offset JSON file lists no partition")
    return out


def _partitions_of(client: Any, topic: str) -> list[int]:
    md = client.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    if md is None or md.error is not None:
        fail(f"topic {topic}: {md.error.str() if md is not None and md.error else 'not found'}")
    return sorted(md.partitions)


def delete_records(
    offset_json_file: Path | None = typer.Option(
        None, "--offset-json-file", help="kafka-delete-records.sh's JSON: partitions and offsets"
    ),
    topic: str | None = typer.Option(None, "--topic", "-t", help="Topic (instead of a file)"),
    partition: list[int] | None = typer.Option(
        None, "--partition", "-p", help="Partition; repeatable; default: all of them"
    ),
    offset: int | None = typer.Option(
        None, "--offset", help="Delete every record below this offset (-1: all records)"
    ),
    bootstrap: str = BootstrapOption,
) -> None:
    """Delete records below an offset (kafka-delete-records.sh)."""
    from confluent_kafka import TopicPartition

    with reported():
        client = admin(bootstrap)
        if offset_json_file is not None:
            if topic is not None or offset is not None or partition:
                fail("give either --offset-json-file or --topic/--partition/--offset")
            wanted = parse_offset_json(offset_json_file.read_text())
        else:
            if topic is None or offset is None:
                fail("give --offset-json-file, or --topic and --offset")
            parts = partition or _partitions_of(client, topic)
            wanted = [(topic, p, offset) for p in parts]
        print("Executing records delete operation")
        futures = client.delete_records(
            [TopicPartition(t, p, o) for t, p, o in wanted], request_timeout=TIMEOUT_S
        )
        failed = False
        lines = []
        for tp, future in sorted(futures.items(), key=lambda i: (i[0].topic, i[0].partition)):
            try:
                result = future.result(TIMEOUT_S)
                lines.append(f"partition: {tp.topic}-{tp.partition}\t"
                             f"low_watermark: {result.low_watermark}")
            except Exception as e:  # a KafkaException per partition
                failed = True
                lines.append(f"partition: {tp.topic}-{tp.partition}\terror: {error_text(e)}")
        print("Records delete operation completed:")
        for line in lines:
            print(line)
        if failed:
            raise typer.Exit(1)
