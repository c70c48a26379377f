"""`odradek advise check` against a running broker: a topic's and the broker's live
configs, read through DescribeConfigs."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from odradek.cli import advise
from tests.conftest import BrokerProcess

runner = CliRunner()


def create(bootstrap: str, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(15)


def live_check(bootstrap: str, goal: str, *topics: str) -> tuple[int, dict[str, Any]]:
    args = ["check", "--goal", goal, "--bootstrap-server", bootstrap, "--format", "json"]
    for t in topics:
        args += ["--topic", t]
    out = runner.invoke(advise.app, args)
    assert out.exit_code in (0, 1), out.output
    return out.exit_code, dict(json.loads(out.output))


def by_place(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in report["findings"]:
        out.setdefault(f["where"], set()).add(f["setting"])
    return out


def test_a_single_copy_topic_and_broker_contradict_durability(broker: BrokerProcess,
                                                              topic_name: str) -> None:
    create(broker.bootstrap, topic_name, **{"min.insync.replicas": "1"})
    code, report = live_check(broker.bootstrap, "durability", topic_name)
    assert code == 1
    assert report["checked"] == ["broker 1", f"topic {topic_name}"]
    found = by_place(report)
    assert found[f"topic {topic_name}"] == {"replication.factor", "min.insync.replicas"}
    # odradek's safe defaults: auto-create is off and unclean election too, so not flagged
    assert found["broker 1"] == {"default.replication.factor",
                                 "offsets.topic.replication.factor", "min.insync.replicas"}
    topic_isr = next(f for f in report["findings"] if f["where"] == f"topic {topic_name}"
                     and f["setting"] == "min.insync.replicas")
    assert topic_isr["value"] == "1" and topic_isr["wanted"] == "2"


def test_a_topic_whose_min_insync_exceeds_its_replicas_is_a_conflict(
        broker: BrokerProcess, topic_name: str) -> None:
    create(broker.bootstrap, topic_name, **{"min.insync.replicas": "2"})
    code, report = live_check(broker.bootstrap, "durability", topic_name)
    assert code == 1
    conflict = next(f for f in report["findings"] if f["kind"] == "conflict")
    assert conflict["where"] == f"topic {topic_name}"
    assert conflict["value"] == "min.insync.replicas=2, replication.factor=1"
    assert "NOT_ENOUGH_REPLICAS" in conflict["why"]


def test_an_available_topic_passes_while_the_broker_default_is_flagged(
        broker: BrokerProcess, topic_name: str) -> None:
    create(broker.bootstrap, topic_name, **{"unclean.leader.election.enable": "true"})
    code, report = live_check(broker.bootstrap, "availability", topic_name)
    assert code == 1
    assert by_place(report) == {"broker 1": {"unclean.leader.election.enable"}}


def test_an_unknown_topic_is_a_usage_error(broker: BrokerProcess) -> None:
    out = runner.invoke(advise.app, ["check", "--goal", "latency", "-b", broker.bootstrap,
                                     "--topic", "no-such-topic"])
    assert out.exit_code == 2 and "does not exist" in out.output
