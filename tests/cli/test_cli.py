"""The `odradek` command as a user runs it, against a real broker."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import BrokerProcess


def odradek(*args: str, stdin: str | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "odradek", *args], input=stdin,
                            capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_topic_lifecycle_with_the_cli(broker: BrokerProcess, topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    odradek("topics", "create", topic_name, "--partitions", "3", "--config",
            "retention.ms=86400000", *b)
    assert topic_name in odradek("topics", "list", *b).stdout.split()
    described = odradek("topics", "describe", topic_name, *b).stdout
    first = described.splitlines()[0]
    assert f"Topic: {topic_name}" in first
    assert "PartitionCount: 3" in first and "ReplicationFactor: 1" in first
    # every non-default config, as kafka-topics.sh lists them: on Kafka 4.1+ that includes
    # the cluster-level min.insync.replicas a new cluster starts with (KIP-966)
    configs = first.split("Configs: ")[1].split(",")
    assert "retention.ms=86400000" in configs
    rows = [line for line in described.splitlines() if "\tPartition:" in line]
    assert len(rows) == 3 and all("Leader: 1" in r and "Isr: 1" in r for r in rows)
    odradek("topics", "alter", topic_name, "--partitions", "4", *b)
    assert "PartitionCount: 4" in odradek("topics", "describe", topic_name, *b).stdout
    shrink = odradek("topics", "alter", topic_name, "--partitions", "2", *b, check=False)
    assert shrink.returncode != 0 and "error" in shrink.stderr.lower()
    odradek("topics", "delete", topic_name, *b)
    assert topic_name not in odradek("topics", "list", *b).stdout.split()


def test_produce_and_consume_with_keys_and_headers(broker: BrokerProcess,
                                                   topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    odradek("topics", "create", topic_name, "--partitions", "1", *b)
    odradek("produce", topic_name, "--key-separator", ":", "--header", "src=cli",
            "--null-marker", "NULL", *b, stdin="a:one\nb:two\nc:NULL\n")
    out = odradek("consume", topic_name, "--from-beginning", "--max-messages", "3",
                  "--format", "%o %k=%s [%h]", "--timeout-ms", "10000", *b).stdout
    assert out.splitlines() == ["0 a=one [src=cli]", "1 b=two [src=cli]", "2 c=NULL [src=cli]"]
    later = odradek("consume", topic_name, "--partition", "0", "--offset", "1",
                    "--max-messages", "1", "--timeout-ms", "10000", *b).stdout
    assert later.strip() == "two"
    by_time = odradek("consume", topic_name, "--timestamp", "2000-01-01T00:00:00",
                      "--max-messages", "3", "--timeout-ms", "10000", *b).stdout
    assert by_time.splitlines() == ["one", "two", "NULL"]


def test_configs_describe_and_alter(broker: BrokerProcess, topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    odradek("topics", "create", topic_name, *b)
    odradek("configs", "alter", "--topic", topic_name, "--add-config",
            "retention.ms=1000,cleanup.policy=compact", *b)
    out = odradek("configs", "describe", "--topic", topic_name, *b).stdout
    assert "retention.ms=1000" in out and "cleanup.policy=compact" in out
    odradek("configs", "alter", "--topic", topic_name, "--delete-config", "retention.ms", *b)
    out = odradek("configs", "describe", "--topic", topic_name, *b).stdout
    assert "retention.ms" not in out
    bad = odradek("configs", "alter", "--topic", topic_name, "--add-config", "retention.ms=x",
                  *b, check=False)
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "retention.ms" in bad.stderr


def test_bad_input_is_one_line_and_non_zero(broker: BrokerProcess) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    bad_name = odradek("topics", "create", "bad name", *b, check=False)
    assert bad_name.returncode != 0
    assert len(bad_name.stderr.strip().splitlines()) == 1, bad_name.stderr
    missing = odradek("topics", "describe", "no-such-topic-here", *b, check=False)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    bad_override = odradek("broker", "--override", "log.retention.hours=soon", check=False)
    assert bad_override.returncode != 0
    assert "log.retention.hours" in bad_override.stderr
    assert "Traceback" not in bad_override.stderr
