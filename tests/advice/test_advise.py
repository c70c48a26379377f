"""`odradek advise`: each goal prints seed 004's settings, by Kafka's names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from odradek.advice import RULES, Goal
from odradek.cli import advise

runner = CliRunner()

# (for, setting, recommended) as seed 004 lists them, goal by goal.
SEED: dict[str, list[tuple[str, str, str]]] = {
    "throughput": [
        ("producer", "batch.size", "100000-200000"),
        ("producer", "linger.ms", "10-100"),
        ("producer", "compression.type", "lz4"),
        ("producer", "acks", "1"),
        ("producer", "retries", "0 (the seed)"),
        ("producer", "buffer.memory", "raise with many partitions"),
        ("producer", "max.block.ms", "bounds the block when buffer.memory is full"),
        ("consumer", "fetch.min.bytes", "~100000"),
        ("consumer", "fetch.max.wait.ms", "the cap on the wait fetch.min.bytes causes"),
    ],
    "latency": [
        ("producer", "linger.ms", "0"),
        ("producer", "compression.type", "none"),
        ("producer", "acks", "1"),
        ("consumer", "fetch.min.bytes", "1"),
        ("broker", "num.replica.fetchers", "> 1, raised one at a time"),
    ],
    "durability": [
        ("producer", "acks", "all"),
        ("producer", "enable.idempotence", "true"),
        ("producer", "retries", ">= 1"),
        ("producer", "max.in.flight.requests.per.connection",
         "1 (<= 5 with enable.idempotence=true)"),
        ("consumer", "enable.auto.commit", "false"),
        ("broker", "default.replication.factor", "3"),
        ("broker", "auto.create.topics.enable", "false (or default.replication.factor=3)"),
        ("broker", "offsets.topic.replication.factor", "3"),
        ("broker", "min.insync.replicas", "2"),
        ("broker", "unclean.leader.election.enable", "false"),
        ("broker", "broker.rack", "the broker's rack id"),
        ("broker", "log.flush.interval.messages", "leave it; lower for a quiet topic"),
        ("broker", "log.flush.interval.ms", "leave it; lower for a quiet topic"),
        ("topic", "replication.factor", "3"),
        ("topic", "min.insync.replicas", "2"),
        ("topic", "unclean.leader.election.enable", "false"),
    ],
    "availability": [
        ("consumer", "session.timeout.ms", "low, 6000-10000"),
        ("consumer", "max.poll.interval.ms", "as low as your processing allows"),
        ("broker", "unclean.leader.election.enable", "true"),
        ("broker", "min.insync.replicas", "1"),
        ("broker", "num.recovery.threads.per.data.dir", "raise, e.g. to the disks in a RAID"),
        ("topic", "unclean.leader.election.enable", "true"),
        ("topic", "min.insync.replicas", "1"),
    ],
}


def advise_json(*args: str) -> dict[str, Any]:
    out = runner.invoke(advise.app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    return dict(json.loads(out.output))


@pytest.mark.parametrize("goal", [g.value for g in Goal])
def test_each_goal_prints_the_seeds_settings_with_default_and_why(goal: str) -> None:
    printed = advise_json("--goal", goal)
    assert printed["goal"] == goal
    got = [(s["for"], s["name"], s["recommended"]) for s in printed["settings"]]
    assert sorted(got) == sorted(SEED[goal])
    assert all(s["default"] and len(s["why"]) > 20 for s in printed["settings"])
    assert printed["notes"], "what no property expresses is printed too"


def test_the_text_names_every_setting_with_its_value_default_and_why() -> None:
    out = runner.invoke(advise.app, ["--goal", "latency"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "  linger.ms: 0  (default 5)" in lines
    assert "  fetch.min.bytes: 1  (default 1)" in lines
    # num.replica.fetchers has no single right value: advice, never flagged by check
    assert "  num.replica.fetchers: > 1, raised one at a time  (default 1)  advice" in lines
    why = lines[lines.index("  linger.ms: 0  (default 5)") + 1]
    assert why.strip().startswith("Send each record at once")


def _properties(text: str) -> dict[str, str]:
    pairs = [line.split("=", 1) for line in text.splitlines()
             if line and not line.startswith("#")]
    return {k: v for k, v in pairs}


def test_properties_pick_a_value_inside_each_range_the_seed_gives() -> None:
    out = runner.invoke(advise.app, ["--goal", "throughput", "--format", "properties"])
    assert out.exit_code == 0, out.output
    props = _properties(out.output)
    assert 100_000 <= int(props["batch.size"]) <= 200_000
    assert 10 <= int(props["linger.ms"]) <= 100
    assert props["compression.type"] == "lz4" and props["acks"] == "1"
    assert int(props["fetch.min.bytes"]) == 100_000
    assert "retries" not in props, "the seed's retries=0 loses data: advice only, a comment"
    assert "# retries: 0 (the seed)" in out.output


def test_a_topic_replication_factor_is_no_config_and_stays_a_comment() -> None:
    out = runner.invoke(advise.app, ["--goal", "durability", "--for", "topic", "-f",
                                     "properties"])
    props = _properties(out.output)
    assert props == {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
    assert "--replication-factor 3" in out.output


def test_for_limits_the_settings_to_one_side() -> None:
    printed = advise_json("--goal", "durability", "--for", "consumer")
    assert [s["name"] for s in printed["settings"]] == ["enable.auto.commit"]


def test_a_goal_is_required() -> None:
    out = runner.invoke(advise.app, [])
    assert out.exit_code == 2 and "--goal" in out.output


def test_every_rule_with_a_test_accepts_its_own_pick() -> None:
    from odradek.advice.rules import Lookup

    for goal, rules in RULES.items():
        picks = {r.name: r.pick for r in rules if r.pick is not None}
        for r in rules:
            if r.want.test is not None and r.pick is not None:
                assert r.want.test(r.pick, Lookup(picks)), (goal, r.name, r.pick)
