"""kafka-console-producer/-consumer and kafka-consumer-groups as Kafka's docs run them;
output shapes as ConsoleConsumer's DefaultMessageFormatter and ConsumerGroupCommand print."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from tests.kafka_tools.conftest import Run

OFFSET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"]
STATE_COLUMNS = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
RESET_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def _produce(kafka: Run, bootstrap: list[str], topic: str) -> None:
    kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic)
    sent = kafka("kafka-console-producer.sh", "--topic", topic, *bootstrap,
                 "--property", "parse.key=true", "--property", "key.separator=:",
                 stdin="k1:first\nk2:second\nk3:third\n")
    assert sent.returncode == 0, sent.stderr


def test_console_round_trip_with_keys_and_record_metadata(kafka: Run, bootstrap: list[str],
                                                          topic_name: str) -> None:
    _produce(kafka, bootstrap, topic_name)
    plain = kafka("kafka-console-consumer.sh", "--topic", topic_name, "--from-beginning",
                  *bootstrap, "--max-messages", "3")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "first\nsecond\nthird\n"
    assert plain.stderr.strip().endswith("Processed a total of 3 messages")

    full = kafka("kafka-console-consumer.sh", "--topic", topic_name, "--from-beginning",
                 *bootstrap, "--max-messages", "1", "--property", "print.timestamp=true",
                 "--property", "print.partition=true", "--property", "print.offset=true",
                 "--property", "print.headers=true", "--property", "print.key=true")
    assert re.fullmatch(r"CreateTime:\d+\tPartition:0\tOffset:0\tNO_HEADERS\tk1\tfirst\n",
                        full.stdout), full.stdout

    with_headers = f"{topic_name}-h"
    kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", with_headers)
    sent = kafka("kafka-console-producer.sh", *bootstrap, "--topic", with_headers,
                 "--property", "parse.headers=true", "--property", "parse.key=true",
                 "--property", "null.marker=NULL",
                 stdin="h1:v1,h2:v2\tk\tvalue\nh3:x\tgone\tNULL\n")
    assert sent.returncode == 0, sent.stderr
    shown = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", with_headers,
                  "--from-beginning", "--max-messages", "2", "--property", "print.headers=true",
                  "--property", "print.key=true")
    assert shown.stdout == "h1:v1,h2:v2\tk\tvalue\nh3:x\tgone\tnull\n"
    bad = kafka("kafka-console-producer.sh", *bootstrap, "--topic", with_headers,
                "--property", "parse.key=true", stdin="no separator here\n")
    assert bad.returncode == 1
    assert bad.stderr == "No key separator found on line number 1: 'no separator here'\n"

    from_offset = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", topic_name,
                        "--partition", "0", "--offset", "2", "--max-messages", "1")
    assert from_offset.stdout == "third\n"
    partition_start = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", topic_name,
                            "--partition", "0", "--from-beginning", "--max-messages", "1")
    assert partition_start.stdout == "first\n"


def test_console_tools_refuse_bad_flags(kafka: Run, bootstrap: list[str]) -> None:
    no_partition = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", "t",
                         "--offset", "3")
    assert no_partition.returncode == 1
    assert no_partition.stderr.splitlines()[0] == \
        "The partition is required when offset is specified."
    no_topic = kafka("kafka-console-producer.sh", *bootstrap, stdin="")
    assert no_topic.returncode == 1
    assert no_topic.stderr.splitlines()[0] == 'Missing required argument "[topic]"'
    unknown = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", "t", "--from-start")
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines()[0] == "from-start is not a recognized option"


def test_consumer_groups_describe_reset_and_delete(kafka: Run, bootstrap: list[str],
                                                   topic_name: str) -> None:
    group = f"g-{topic_name}"
    _produce(kafka, bootstrap, topic_name)
    read = kafka("kafka-console-consumer.sh", *bootstrap, "--topic", topic_name, "--group", group,
                 "--from-beginning", "--max-messages", "3")
    assert read.returncode == 0, read.stderr

    assert group in kafka("kafka-consumer-groups.sh", *bootstrap, "--list").stdout.split()
    # --state with an optional argument: a filter on --list
    empty = _rows(kafka("kafka-consumer-groups.sh", *bootstrap, "--list", "--state",
                        "Empty").stdout)
    assert empty[0] == ["GROUP", "STATE"] and [group, "Empty"] in empty
    stable = kafka("kafka-consumer-groups.sh", *bootstrap, "--list", "--state=Stable")
    assert group not in stable.stdout.split()
    described = _rows(kafka("kafka-consumer-groups.sh", *bootstrap, "--describe",
                            "--group", group).stdout)
    header = next(r for r in described if r[0] == "GROUP")
    assert header == OFFSET_COLUMNS
    row = next(r for r in described if r[0] == group)
    assert row[1:6] == [topic_name, "0", "3", "3", "0"]

    state = kafka("kafka-consumer-groups.sh", *bootstrap, "--describe", "--group", group,
                  "--state")
    # ConsumerGroupCommand.printStates: a blank line, the header, the group's line
    blank, header_line, line = state.stdout.splitlines()
    assert blank == "" and re.split(r" {2,}", header_line.strip()) == STATE_COLUMNS
    assert re.match(rf"^{group} +127\.0\.0\.1:\d+  \(1\) +\S* +Empty +0$", line), line
    assert f"Consumer group '{group}' has no active members." in state.stderr

    members = kafka("kafka-consumer-groups.sh", *bootstrap, "--describe", "--group", group,
                    "--members", "--verbose").stdout.splitlines()
    assert members[0] == "" and members[1].split() == ["GROUP", "CONSUMER-ID", "HOST",
                                                       "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]

    dry = kafka("kafka-consumer-groups.sh", *bootstrap, "--group", group, "--reset-offsets",
                "--to-earliest", "--topic", topic_name, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert _rows(dry.stdout) == [RESET_COLUMNS, [group, topic_name, "0", "0"]]
    still = _rows(kafka("kafka-consumer-groups.sh", *bootstrap, "--describe",
                        "--group", group).stdout)
    assert next(r for r in still if r[0] == group)[3] == "3"

    done = kafka("kafka-consumer-groups.sh", *bootstrap, "--group", group, "--reset-offsets",
                 "--to-earliest", "--topic", topic_name, "--execute")
    assert done.returncode == 0, done.stderr
    after = _rows(kafka("kafka-consumer-groups.sh", *bootstrap, "--describe",
                        "--group", group).stdout)
    assert next(r for r in after if r[0] == group)[3:6] == ["0", "3", "3"]

    unknown = kafka("kafka-consumer-groups.sh", *bootstrap, "--delete", "--group",
                    f"{group}-none")
    lines = unknown.stdout.splitlines()
    assert lines[:2] == ["", "Error: Deletion of some consumer groups failed:"]
    assert lines[2].startswith(f"* Group '{group}-none' could not be deleted due to: ")
    deleted = kafka("kafka-consumer-groups.sh", *bootstrap, "--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in kafka("kafka-consumer-groups.sh", *bootstrap, "--list").stdout.split()


def test_consumer_groups_refuses_bad_and_conflicting_flags(kafka: Run,
                                                           bootstrap: list[str]) -> None:
    def first_error(*args: str) -> str:
        out = kafka("kafka-consumer-groups.sh", *bootstrap, *args)
        assert out.returncode == 1
        return out.stderr.splitlines()[0]

    assert first_error("--describe") == \
        "Option [describe] takes one of these options: [all-groups], [group]"
    assert first_error("--group", "g", "--reset-offsets", "--to-earliest", "--to-latest",
                       "--all-topics", "--execute") == \
        'Option "[to-earliest]" can\'t be used with option "[to-latest]"'
    assert first_error("--group", "g", "--reset-offsets", "--to-earliest", "--all-topics",
                       "--execute", "--dry-run") == \
        "Option [reset-offsets] only accepts one of [execute] and [dry-run]"
    assert first_error("--list", "--describe", "--group", "g") == (
        "Command must include exactly one action: --list, --describe, --delete, "
        "--reset-offsets, --delete-offsets")
    missing = kafka("kafka-consumer-groups.sh", "--list")
    assert missing.stderr.splitlines()[0] == 'Missing required argument "[bootstrap-server]"'


def test_console_consumer_stops_on_sigint_even_when_started_with_it_ignored(
        kafka_home: Path, bootstrap: list[str], topic_name: str) -> None:
    """As `kafka-console-consumer.sh … &` from a script: SIGINT arrives ignored."""
    proc = subprocess.Popen(
        [str(kafka_home / "bin" / "kafka-console-consumer.sh"), *bootstrap, "--topic",
         topic_name, "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        # started when the interpreter has its handlers: wait for the client's first poll
        while time.monotonic() < deadline and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=1)
                break
            except subprocess.TimeoutExpired:
                continue
        assert proc.returncode is not None, "the consumer ignored SIGINT"
        assert "Processed a total of 0 messages" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
