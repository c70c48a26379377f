"""kafka-topics.sh and kafka-configs.sh with the invocations of Kafka's quickstart and
operations docs; output shapes as TopicCommand and ConfigCommand print them."""

from __future__ import annotations

import re

from tests.kafka_tools.conftest import Run

# TopicCommand's TopicDescription and PartitionDescription lines
TOPIC_LINE = re.compile(r"^Topic: (\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (\d+)\t"
                        r"ReplicationFactor: (\d+)\tConfigs: (.*)$")
PARTITION_LINE = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+|none)\t"
                            r"Replicas: ([\d,]*)\tIsr: ([\d,]*)\tElr: (N/A|[\d,]*)\t"
                            r"LastKnownElr: (N/A|[\d,]*)$")
# ConfigCommand's describe lines
CONFIG_HEADER = re.compile(r"^(Dynamic|All) configs for (topic|broker) (\S+) are:$")
CONFIG_LINE = re.compile(r"^  ([a-z0-9._-]+)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$")


def test_quickstart_create_describe_alter_delete(kafka: Run, bootstrap: list[str],
                                                 topic_name: str) -> None:
    created = kafka("kafka-topics.sh", "--create", "--topic", topic_name, *bootstrap,
                    "--partitions", "3", "--replication-factor", "1",
                    "--config", "retention.ms=86400000", "--config=max.message.bytes=64000")
    assert created.returncode == 0, created.stdout + created.stderr
    assert created.stdout == f"Created topic {topic_name}.\n"

    described = kafka("kafka-topics.sh", "--describe", "--topic", topic_name, *bootstrap)
    assert described.returncode == 0, described.stderr
    first, *rows = described.stdout.splitlines()
    topic = TOPIC_LINE.match(first)
    assert topic is not None, first
    assert topic.group(1, 2, 3) == (topic_name, "3", "1")
    assert set(topic.group(4).split(",")) >= {"retention.ms=86400000", "max.message.bytes=64000"}
    by_id = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic-id",
                  first.split("\t")[1].removeprefix("TopicId: "))
    assert by_id.stdout.splitlines()[0] == first
    parts = [PARTITION_LINE.match(r) for r in rows]
    assert all(parts) and [m.group(2) for m in parts if m] == ["0", "1", "2"]

    assert topic_name in kafka("kafka-topics.sh", *bootstrap, "--list").stdout.splitlines()
    # the reports print partition lines only, and only those that match
    at_min = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic", topic_name,
                   "--at-min-isr-partitions").stdout.splitlines()
    assert len(at_min) == 3 and all(PARTITION_LINE.match(line) for line in at_min)
    under = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic", topic_name,
                  "--under-replicated-partitions")
    assert (under.returncode, under.stdout) == (0, "")
    overrides = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic", topic_name,
                      "--topics-with-overrides").stdout.splitlines()
    assert len(overrides) == 1 and TOPIC_LINE.match(overrides[0])
    altered = kafka("kafka-topics.sh", *bootstrap, "--alter", "--topic", topic_name,
                    "--partitions", "4")
    assert altered.returncode == 0 and altered.stdout == ""
    again = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic", topic_name).stdout
    assert "PartitionCount: 4" in again.splitlines()[0]

    deleted = kafka("kafka-topics.sh", *bootstrap, "--delete", "--topic", topic_name)
    assert deleted.returncode == 0 and deleted.stdout == ""
    assert topic_name not in kafka("kafka-topics.sh", *bootstrap, "--list").stdout.split()


def test_create_an_existing_topic(kafka: Run, bootstrap: list[str], topic_name: str) -> None:
    assert kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name).returncode == 0
    again = kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name)
    assert again.returncode == 1
    assert again.stdout.startswith("Error while executing topic command : ")
    assert "already exists" in again.stdout
    quiet = kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name,
                  "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stdout == ""
    missing = kafka("kafka-topics.sh", *bootstrap, "--describe", "--topic", topic_name + "-no")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"Topic '{topic_name}-no' does not exist as expected"


def test_topic_tool_refuses_bad_and_conflicting_flags(kafka: Run,
                                                      bootstrap: list[str]) -> None:
    unknown = kafka("kafka-topics.sh", *bootstrap, "--list", "--foo")
    assert unknown.returncode == 1
    assert unknown.stdout == ("Error while executing topic command : foo is not a recognized "
                              "option\n")
    two = kafka("kafka-topics.sh", *bootstrap, "--list", "--describe")
    assert two.returncode == 1
    assert two.stderr.splitlines()[0] == ("Command must include exactly one action: --list, "
                                          "--describe, --create, --alter or --delete")
    conflict = kafka("kafka-topics.sh", *bootstrap, "--describe", "--partitions", "3")
    assert conflict.returncode == 1
    assert conflict.stderr.splitlines()[0] == \
        'Option "[partitions]" can\'t be used with option "[describe]"'
    no_topic = kafka("kafka-topics.sh", *bootstrap, "--create")
    assert no_topic.stderr.splitlines()[0] == 'Missing required argument "[topic]"'
    version = kafka("kafka-topics.sh", "--version")
    assert version.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\n", version.stdout)
    no_server = kafka("kafka-topics.sh", "--list")
    assert (no_server.returncode, no_server.stderr) == (1, "--bootstrap-server must be specified\n")
    bad_number = kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", "x",
                       "--partitions", "many")
    assert bad_number.returncode == 1
    assert "Cannot parse argument 'many' of option partitions" in bad_number.stdout


def test_configs_add_describe_delete(kafka: Run, bootstrap: list[str], topic_name: str) -> None:
    kafka("kafka-topics.sh", *bootstrap, "--create", "--topic", topic_name)
    entity = ["--entity-type", "topics", "--entity-name", topic_name]
    added = kafka("kafka-configs.sh", *bootstrap, *entity, "--alter",
                  "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"Completed updating config for topic {topic_name}.\n"

    described = kafka("kafka-configs.sh", *bootstrap, *entity, "--describe")
    header, *lines = described.stdout.splitlines()
    assert CONFIG_HEADER.match(header) and header == f"Dynamic configs for topic {topic_name} are:"
    values = {}
    for line in lines:
        m = CONFIG_LINE.match(line)
        assert m is not None, line
        values[m.group(1)] = m.group(2)
        assert m.group(4).startswith(f"DYNAMIC_TOPIC_CONFIG:{m.group(1)}=")
    assert values == {"retention.ms": "3600000", "cleanup.policy": "compact,delete"}

    deleted = kafka("kafka-configs.sh", *bootstrap, "--topic", topic_name, "--alter",
                    "--delete-config", "retention.ms")
    assert deleted.returncode == 0, deleted.stderr
    after = kafka("kafka-configs.sh", *bootstrap, "--topic", topic_name, "--describe").stdout
    assert "retention.ms=" not in after and "cleanup.policy=compact,delete" in after

    not_set = kafka("kafka-configs.sh", *bootstrap, *entity, "--alter",
                    "--delete-config", "retention.ms")
    assert (not_set.returncode, not_set.stderr) == (1, "Invalid config(s): retention.ms\n")


def test_broker_configs_describe_all(kafka: Run, bootstrap: list[str]) -> None:
    out = kafka("kafka-configs.sh", *bootstrap, "--entity-type", "brokers", "--entity-name", "1",
                "--describe", "--all")
    assert out.returncode == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    assert header == "All configs for broker 1 are:"
    assert lines and all(CONFIG_LINE.match(line) for line in lines)


def test_configs_tool_refuses_bad_and_conflicting_flags(kafka: Run,
                                                        bootstrap: list[str]) -> None:
    both = kafka("kafka-configs.sh", *bootstrap, "--topic", "t", "--describe", "--alter")
    assert both.returncode == 1
    assert both.stderr.splitlines()[0] == ("Command must include exactly one action: "
                                           "--describe, --alter")
    nothing = kafka("kafka-configs.sh", *bootstrap, "--topic", "t", "--alter")
    assert nothing.stderr == ("At least one of --add-config, --add-config-file, or "
                              "--delete-config must be specified with --alter\n")
    twice = kafka("kafka-configs.sh", *bootstrap, "--entity-type", "topics", "--topic", "t",
                  "--describe")
    assert twice.stderr == "Duplicate entity type(s) specified: topics\n"
    mixed = kafka("kafka-configs.sh", *bootstrap, "--entity-name", "x", "--topic", "t",
                  "--describe")
    assert mixed.stderr == ("--entity-{type,name,default} should not be used in conjunction "
                            "with specific entity flags\n")
    bad_type = kafka("kafka-configs.sh", *bootstrap, "--entity-type", "cats", "--describe")
    assert bad_type.returncode == 1
    assert bad_type.stderr.startswith("Invalid entity type cats, the entity type must be one of")
    unknown = kafka("kafka-configs.sh", *bootstrap, "--describe", "--entity-typo", "topics")
    assert (unknown.returncode, unknown.stderr) == (1, "entity-typo is not a recognized option\n")
