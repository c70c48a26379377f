"""`odradek share-groups` (kafka-share-groups.sh) against a broker: list, describe with
start offsets and lag, reset offsets (refused while the group has members), delete;
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets underneath.
"""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from odradek.cli import share_groups
from tests.conftest import BrokerProcess
from tests.share.helpers import earliest_group, new_topic, poll_until, produce, share_consumer

runner = CliRunner()


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()]


def test_describe_reset_and_delete_a_share_groups_offsets(share_broker: BrokerProcess) -> None:
    b = share_broker.bootstrap
    topic = new_topic(b)
    group = earliest_group(b)
    produce(b, topic, [f"r{i}" for i in range(5)])
    with share_consumer(b, group, topic) as c:
        def accept_three(batch: list[Any]) -> None:
            for m in batch:
                if m.offset() < 3:
                    c.acknowledge(m)
                else:
                    c.acknowledge(m, share_groups_release())
            assert all(e is None for e in c.commit_sync(30).values())

        poll_until(c, lambda seen: len(seen) >= 5, on_batch=accept_three)
        listed = runner.invoke(share_groups.app, ["list", "--state", "-b", b])
        assert [group, "Stable"] in rows(listed.output), listed.output
        members = runner.invoke(share_groups.app, ["describe", group, "--members", "-b", b],
                                terminal_width=250)
        assert members.exit_code == 0, members.output
        assert rows(members.output)[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                           "#PARTITIONS", "ASSIGNMENT"]
        assert rows(members.output)[1][-1] == f"{topic}:0"
        refused = runner.invoke(share_groups.app, ["reset-offsets", group, "--topic", topic,
                                                   "--to-earliest", "--execute", "-b", b])
        assert refused.exit_code != 0 and "not empty" in refused.output

    out = runner.invoke(share_groups.app, ["describe", group, "-b", b], terminal_width=250)
    assert out.exit_code == 0, out.output
    assert rows(out.output)[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH",
                                   "START-OFFSET", "LAG"]
    # 0-2 accepted, 3-4 released: the start is 3 and two records are still to deliver
    assert rows(out.output)[1][:3] + rows(out.output)[1][4:] == [group, topic, "0", "3", "2"]

    dry = runner.invoke(share_groups.app, ["reset-offsets", group, "--topic", topic,
                                           "--to-earliest", "-b", b])
    assert dry.exit_code == 0 and [group, topic, "0", "0"] in rows(dry.output)
    done = runner.invoke(share_groups.app, ["reset-offsets", group, "--topic", topic,
                                            "--to-earliest", "--execute", "-b", b])
    assert done.exit_code == 0, done.output
    with share_consumer(b, group, topic) as again:
        got = poll_until(again, lambda seen: len(seen) >= 5,
                         on_batch=lambda batch: [again.acknowledge(m) for m in batch])
        # a new state: everything again, delivered for the first time in it
        assert sorted((m.offset(), m.delivery_count()) for m in got) == \
            [(o, 1) for o in range(5)]
        assert all(e is None for e in again.commit_sync(30).values())

    deleted = runner.invoke(share_groups.app, ["delete-offsets", group, "--topic", topic,
                                               "-b", b])
    assert deleted.exit_code == 0 and [topic, "Successful"] in rows(deleted.output)
    gone = runner.invoke(share_groups.app, ["describe", group, "-b", b], terminal_width=250)
    assert [r[4] for r in rows(gone.output)[1:]] in ([], ["-"]), gone.output
    missing = runner.invoke(share_groups.app, ["delete-offsets", group, "--topic", "nope",
                                               "-b", b])
    assert missing.exit_code != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.output


def share_groups_release() -> Any:
    from confluent_kafka import AcknowledgeType

    return AcknowledgeType.RELEASE
