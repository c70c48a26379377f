"""--command-config with the Java client's property names, against a SASL/PLAIN listener:
the file a Kafka runbook already has works unchanged."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sasl_broker import plain_sasl_broker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def sasl_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with plain_sasl_broker(tmp_path_factory.mktemp("sasl") / "data") as (_, port):
        yield f"127.0.0.1:{port}"


def _client_properties(path: Path, password: str) -> Path:
    # as a Java client's admin.properties is written: a JAAS line, a serializer to ignore
    path.write_text(
        "# admin client\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="alice" password="{password}";\n'
        "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n")
    return path


def test_command_config_logs_in_with_the_java_clients_properties(
        kafka_home: Path, sasl_address: str, tmp_path: Path) -> None:
    config = _client_properties(tmp_path / "admin.properties", "alice-secret")

    def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(kafka_home / "bin" / script), "--bootstrap-server",
                               sasl_address, "--command-config", str(config), *args],
                              capture_output=True, text=True, timeout=120)

    created = run("kafka-topics.sh", "--create", "--topic", "secured-topic")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "secured-topic" in run("kafka-topics.sh", "--list").stdout.split()
    altered = run("kafka-configs.sh", "--entity-type", "topics", "--entity-name",
                  "secured-topic", "--alter", "--add-config", "retention.ms=60000")
    assert altered.returncode == 0, altered.stderr
    groups = run("kafka-consumer-groups.sh", "--list")
    assert groups.returncode == 0, groups.stderr


def test_command_config_that_names_a_missing_file(kafka_home: Path, sasl_address: str) -> None:
    out = subprocess.run([str(kafka_home / "bin" / "kafka-topics.sh"), "--bootstrap-server",
                          sasl_address, "--command-config", "/nonexistent/admin.properties",
                          "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout == ("Error while executing topic command : /nonexistent/admin.properties "
                          "(No such file or directory)\n")


def test_command_config_with_a_wrong_password_fails_with_one_line(
        kafka_home: Path, sasl_address: str, tmp_path: Path) -> None:
    config = _client_properties(tmp_path / "admin.properties", "wrong")
    out = subprocess.run([str(kafka_home / "bin" / "kafka-topics.sh"), "--bootstrap-server",
                          sasl_address, "--command-config", str(config), "--list"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stdout.startswith("Error while executing topic command : ")
    assert len(out.stdout.splitlines()) == 1 and "uthentication" in out.stdout
