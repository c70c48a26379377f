"""`odradek advise check` on settings files: contradictions exit 1, conforming configs 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from odradek.advice import Goal, Scope, Settings, check
from odradek.cli import advise

runner = CliRunner()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run_check(*args: str) -> tuple[int, dict[str, Any]]:
    out = runner.invoke(advise.app, ["check", *args, "--format", "json"])
    assert out.exit_code in (0, 1), out.output
    return out.exit_code, dict(json.loads(out.output))


def flagged(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["kind"], f["setting"]) for f in report["findings"]}


def test_durability_with_acks_1_is_flagged_with_what_the_goal_wants_and_why(
        tmp_path: Path) -> None:
    producer = write(tmp_path, "producer.properties",
                     "acks=1\nenable.idempotence=true\nmax.in.flight.requests.per.connection=5\n")
    code, report = run_check("--goal", "durability", "--producer-config", str(producer))
    assert code == 1
    acks = next(f for f in report["findings"] if f["setting"] == "acks")
    assert acks["value"] == "1" and acks["wanted"] == "all" and acks["kind"] == "durability"
    assert "min.insync.replicas" in acks["why"]
    # and idempotence with acks=1 contradicts itself, whatever the goal
    assert ("conflict", "enable.idempotence + acks") in flagged(report)


def test_latency_with_linger_100_is_flagged_and_the_text_names_setting_value_and_want(
        tmp_path: Path) -> None:
    producer = write(tmp_path, "p.properties", "linger.ms=100\nacks=1\ncompression.type=none\n")
    out = runner.invoke(advise.app, ["check", "--goal", "latency", "--producer-config",
                                     str(producer)], terminal_width=300)
    assert out.exit_code == 1
    line = next(li for li in out.output.splitlines() if "linger.ms" in li)
    assert "[latency]" in line and "linger.ms=100" in line and "wanted 0" in line


def test_unset_settings_are_judged_by_their_default_and_say_so(tmp_path: Path) -> None:
    consumer = write(tmp_path, "c.properties", "group.id=g\n")
    code, report = run_check("--goal", "durability", "--consumer-config", str(consumer))
    assert code == 1
    (finding,) = report["findings"]
    assert finding["setting"] == "enable.auto.commit"
    assert finding["value"] == "true (not set: Kafka's default)"


@pytest.mark.parametrize("goal", [g.value for g in Goal])
def test_the_settings_advise_prints_pass_their_own_check(goal: str, tmp_path: Path) -> None:
    args = ["--goal", goal]
    for scope, flag in (("producer", "--producer-config"), ("consumer", "--consumer-config"),
                        ("broker", "--broker-config")):
        printed = runner.invoke(advise.app, ["--goal", goal, "--for", scope, "-f",
                                             "properties"])
        args += [flag, str(write(tmp_path, f"{scope}.properties", printed.output))]
    code, report = run_check(*args)
    assert code == 0, report["findings"]
    assert report["findings"] == []


def test_settings_that_contradict_each_other_are_flagged_whatever_the_goal(
        tmp_path: Path) -> None:
    producer = write(tmp_path, "p.properties",
                     "enable.idempotence=true\nmax.in.flight.requests.per.connection=6\n"
                     "retries=0\ncompression.type=lz4\nlinger.ms=20\nbatch.size=150000\n"
                     "acks=1\n")
    consumer = write(tmp_path, "c.properties",
                     "heartbeat.interval.ms=12000\nsession.timeout.ms=10000\n"
                     "fetch.min.bytes=100000\nfetch.max.bytes=50000\n")
    broker = write(tmp_path, "server.properties",
                   "min.insync.replicas=3\ndefault.replication.factor=2\n")
    code, report = run_check("--goal", "throughput", "--producer-config", str(producer),
                             "--consumer-config", str(consumer), "--broker-config", str(broker))
    assert code == 1
    conflicts = {s for kind, s in flagged(report) if kind == "conflict"}
    assert conflicts == {
        "enable.idempotence + acks",
        "enable.idempotence + max.in.flight.requests.per.connection",
        "enable.idempotence + retries",
        "heartbeat.interval.ms + session.timeout.ms",
        "fetch.min.bytes + fetch.max.bytes",
        "min.insync.replicas + default.replication.factor",
        "acks + min.insync.replicas",  # the brokers' min.insync.replicas ignores acks=1
    }
    assert {s for kind, s in flagged(report) if kind == "throughput"} == set()


def test_min_insync_above_the_replication_factor_is_flagged_but_retention_below_segment_is_not(
        ) -> None:
    topic = Settings.of(Scope.TOPIC, "topic t", {
        "min.insync.replicas": "3", "replication.factor": "2",
        "retention.ms": "3600000", "segment.ms": "604800000"})
    findings = check(Goal.AVAILABILITY, [topic])
    assert {(f.goal, f.name) for f in findings} == {
        (Goal.AVAILABILITY, "min.insync.replicas"),
        (Goal.AVAILABILITY, "unclean.leader.election.enable"),
        (None, "min.insync.replicas + replication.factor"),
    }


def test_retries_without_idempotence_reorder_unless_one_request_is_in_flight() -> None:
    reorders = Settings.of(Scope.PRODUCER, "p", {"enable.idempotence": "false"})
    ordered = Settings.of(Scope.PRODUCER, "p", {"enable.idempotence": "false",
                                                 "max.in.flight.requests.per.connection": "1"})
    assert [f.name for f in check(Goal.LATENCY, [reorders]) if f.goal is None] == [
        "enable.idempotence + retries + max.in.flight.requests.per.connection"]
    assert [f for f in check(Goal.LATENCY, [ordered]) if f.goal is None] == []


def test_a_topic_that_recompresses_the_producers_batches_is_flagged() -> None:
    producer = Settings.of(Scope.PRODUCER, "p", {"compression.type": "lz4"})
    topic = Settings.of(Scope.TOPIC, "topic t", {"compression.type": "gzip",
                                                  "replication.factor": "1"})
    same = Settings.of(Scope.TOPIC, "topic u", {"compression.type": "lz4",
                                                 "replication.factor": "1"})
    names = [(f.where, f.name) for f in check(Goal.THROUGHPUT, [producer, topic, same])
             if f.goal is None]
    assert names == [("p + topic t", "compression.type")]


def test_nothing_to_check_is_a_usage_error() -> None:
    out = runner.invoke(advise.app, ["check", "--goal", "latency"])
    assert out.exit_code == 2 and "nothing to check" in out.output


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    out = runner.invoke(advise.app, ["check", "--goal", "latency", "--producer-config",
                                     str(tmp_path / "nope.properties")])
    assert out.exit_code == 2


def test_librdkafka_names_are_read_as_kafkas(tmp_path: Path) -> None:
    producer = write(tmp_path, "p.properties", "queue.buffering.max.ms=50\n"
                     "request.required.acks=-1\ncompression.codec=none\n")
    code, report = run_check("--goal", "latency", "--producer-config", str(producer))
    assert code == 1
    assert {(f["setting"], f["value"]) for f in report["findings"]} == {
        ("linger.ms", "50"), ("acks", "-1")}
