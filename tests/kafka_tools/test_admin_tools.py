"""kafka-delete-records, -leader-election, -reassign-partitions, -dump-log and the perf
tests, run as Kafka's operations docs run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import BrokerProcess
from tests.kafka_tools.conftest import Run

PRODUCER_SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$")
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def test_perf_tests_then_delete_records_and_dump_log(kafka: Run, bootstrap: list[str],
                                                     broker: BrokerProcess, topic_name: str,
                                                     tmp_path: Path) -> None:
    kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name)
    produced = kafka("kafka-producer-perf-test.sh", "--topic", topic_name, "--num-records", "500",
                     "--record-size", "100", "--throughput", "-1", "--producer-props", "acks=1",
                     f"bootstrap.servers={broker.bootstrap}")
    assert produced.returncode == 0, produced.stderr
    assert PRODUCER_SUMMARY.match(produced.stdout.splitlines()[-1]), produced.stdout

    consumed = kafka("kafka-consumer-perf-test.sh", *bootstrap, "--messages", "500",
                     "--topic", topic_name)
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()[-2:]
    assert header == CONSUMER_HEADER
    assert len(line.split(", ")) == 10 and line.split(", ")[4] == "500"

    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0,
                                                "offset": 100}], "version": 1}))
    deleted = kafka("kafka-delete-records.sh", *bootstrap, "--offset-json-file", str(spec))
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == [
        "Executing records delete operation", "Records delete operation completed:",
        f"partition: {topic_name}-0\tlow_watermark: 100"]

    segment = broker.data_dir / f"{topic_name}-0" / "00000000000000000000.log"
    dumped = kafka("kafka-dump-log.sh", "--files", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    lines = dumped.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert any(line.startswith("baseOffset: 0 lastOffset: ") for line in lines)
    assert any(re.match(r"^\| offset: \d+ CreateTime: \d+ keySize: -1 valueSize: 100", line)
               for line in lines)


def test_leader_election_and_reassignment_generate(kafka: Run, bootstrap: list[str],
                                                   topic_name: str, tmp_path: Path) -> None:
    kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name, "--partitions", "2")
    elected = kafka("kafka-leader-election.sh", *bootstrap, "--election-type", "preferred",
                    "--topic", topic_name, "--partition", "0")
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout.startswith("Valid replica already elected for partitions "
                                     f"{topic_name}-0")

    listed = tmp_path / "election.json"
    listed.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0},
                                                 {"topic": topic_name, "partition": 1}]}))
    from_file = kafka("kafka-leader-election.sh", *bootstrap, "--election-type", "PREFERRED",
                      "--path-to-json-file", str(listed))
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == ("Valid replica already elected for partitions "
                                f"{topic_name}-0, {topic_name}-1\n")

    topics = tmp_path / "topics-to-move.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic_name}], "version": 1}))
    generated = kafka("kafka-reassign-partitions.sh", *bootstrap, "--topics-to-move-json-file",
                      str(topics), "--broker-list", "1", "--generate")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert "Proposed partition reassignment configuration" in lines
    proposal = json.loads(lines[-1])
    assert proposal["version"] == 1 and len(proposal["partitions"]) == 2
    listed = kafka("kafka-reassign-partitions.sh", *bootstrap, "--list")
    assert (listed.returncode, listed.stdout) == (0, "No partition reassignments found.\n")


def test_admin_tools_refuse_bad_and_conflicting_flags(kafka: Run, bootstrap: list[str]) -> None:
    def first_error(script: str, *args: str) -> str:
        out = kafka(script, *args)
        assert out.returncode == 1, out.stdout
        return out.stderr.splitlines()[0]

    assert first_error("kafka-leader-election.sh", *bootstrap, "--election-type", "preferred",
                       "--all-topic-partitions", "--topic", "t") == (
        "One and only one of the following options is required: topic, all-topic-partitions, "
        "path-to-json-file")
    assert first_error("kafka-leader-election.sh", "--all-topic-partitions") == \
        "Missing required option(s): bootstrap-server, election-type"
    assert first_error("kafka-leader-election.sh", *bootstrap, "--election-type", "preferred",
                       "--topic", "t") == "Missing required option(s): partition"
    assert first_error("kafka-reassign-partitions.sh", *bootstrap, "--verify", "--generate") == (
        "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
        "--list")
    assert first_error("kafka-reassign-partitions.sh", *bootstrap, "--execute") == \
        'Missing required argument "[reassignment-json-file]"'
    assert first_error("kafka-delete-records.sh", *bootstrap) == \
        'Missing required argument "[offset-json-file]"'
    assert first_error("kafka-dump-log.sh", "--print-data-log") == \
        'Missing required argument "[files]"'
    assert first_error("kafka-consumer-perf-test.sh", *bootstrap, "--topic", "t") == \
        'Missing required argument "[messages]"'
    perf = kafka("kafka-producer-perf-test.sh", "--topic", "t", "--record-size", "10")
    assert perf.returncode == 1
    assert perf.stderr.splitlines()[-1].startswith("producer-performance: error: ")


def test_kafka_path_scripts_and_odradek_subcommands_are_the_same_tools(
        kafka_home: Path, bootstrap: list[str]) -> None:
    scripts = sorted(p.name for p in (kafka_home / "bin").iterdir())
    assert scripts == sorted(f"{t}.sh" for t in (
        "kafka-topics", "kafka-configs", "kafka-acls", "kafka-consumer-groups",
        "kafka-console-producer",
        "kafka-console-consumer", "kafka-dump-log", "kafka-reassign-partitions",
        "kafka-leader-election", "kafka-delete-records", "kafka-producer-perf-test",
        "kafka-consumer-perf-test", "kafka-features"))
    # a runbook that calls the scripts by name, with the folder on PATH
    runbook = ('kafka-topics.sh --bootstrap-server "$B" --create --topic runbook-topic '
               '--partitions 2 && kafka-topics.sh --bootstrap-server "$B" --list')
    ran = subprocess.run(["sh", "-c", runbook], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "B": bootstrap[1],
                              "PATH": f"{kafka_home / 'bin'}:{os.environ['PATH']}"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == "Created topic runbook-topic."
    assert "runbook-topic" in ran.stdout.splitlines()[1:]
    # the typer command hands every argument through untouched, --help and = forms included
    direct = subprocess.run([sys.executable, "-m", "odradek", "kafka-topics",
                             f"--bootstrap-server={bootstrap[1]}", "--list", "--bogus"],
                            capture_output=True, text=True, timeout=60)
    assert direct.returncode == 1
    assert direct.stdout == "Error while executing topic command : bogus is not a recognized " \
                            "option\n"
    helped = subprocess.run([sys.executable, "-m", "odradek", "kafka-configs", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert helped.stderr.splitlines()[0].startswith("This tool helps to manipulate and describe")
    assert "--entity-type <String: entity-type>" in helped.stderr
