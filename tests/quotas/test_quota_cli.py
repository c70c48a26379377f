"""Client quotas from the command line, as kafka-configs.sh: `odradek configs` and
`odradek kafka-configs` alter and describe users' and clients' quotas, print
ConfigCommand's lines, and refuse bad input with one line and a non-zero exit.

The commands run in-process (typer's runner, kafka-configs' main) against a real
broker; one runs as a child process to cover the entry point."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from odradek.cli import main
from odradek.cli.kafka import configs as kafka_configs
from tests.conftest import BrokerProcess


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("quota-cli") / "data").start()
    try:
        yield process
    finally:
        process.stop()


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    """`odradek configs …` or `odradek kafka-configs …`, run in this process."""
    if args[0] == "kafka-configs":
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                kafka_configs.main(list(args[1:]))
            except SystemExit as e:
                code = int(e.code or 0)
        return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    result = CliRunner().invoke(main.app, list(args), terminal_width=200)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_odradek_configs_alters_and_describes_quotas(cli_broker: BrokerProcess) -> None:
    b = ["--bootstrap-server", cli_broker.bootstrap]
    done = odradek("configs", "alter", "--entity-type", "users", "--entity-name", "alice",
                   "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048", *b)
    assert done.returncode == 0, done.stderr
    assert "Completed updating config for user alice." in done.stdout
    done = odradek("configs", "alter", "--entity-type", "clients", "--entity-default",
                   "--add-config", "request_percentage=12.5", *b)
    assert done.returncode == 0, done.stderr
    assert "Completed updating default config for clients in the cluster." in done.stdout
    shown = odradek("configs", "describe", "--entity-type", "users", "--entity-name", "alice", *b)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == ("Quota configs for user-principal 'alice' are "
                                    "consumer_byte_rate=2048.0, producer_byte_rate=1024.0")
    shown = odradek("configs", "describe", "--entity-type", "clients", *b)
    assert "Quota configs for the default client-id are request_percentage=12.5" in shown.stdout
    done = odradek("configs", "alter", "--entity-type", "users", "--entity-name", "alice",
                   "--delete-config", "consumer_byte_rate", *b)
    assert done.returncode == 0, done.stderr
    shown = odradek("configs", "describe", "--entity-type", "users", "--entity-name", "alice", *b)
    assert "consumer_byte_rate" not in shown.stdout and "producer_byte_rate" in shown.stdout


def test_odradek_configs_refuses_bad_quotas_in_one_line(cli_broker: BrokerProcess) -> None:
    b = ["--bootstrap-server", cli_broker.bootstrap]
    for add, expected in (("producer_byte_rate=-1", "INVALID_REQUEST"),
                          ("bogus_rate=5", "Invalid configuration key bogus_rate"),
                          ("producer_byte_rate=fast", "Cannot parse quota configuration value")):
        done = odradek("configs", "alter", "--entity-type", "users", "--entity-name", "bob",
                       "--add-config", add, *b)
        assert done.returncode != 0 and expected in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = odradek("configs", "alter", "--entity-type", "users", "--entity-name", "bob",
                   "--delete-config", "producer_byte_rate", *b)
    assert done.returncode != 0 and "Invalid config(s): producer_byte_rate" in done.stderr
    shown = odradek("configs", "describe", "--entity-type", "users", "--entity-name", "bob", *b)
    assert shown.returncode == 0 and shown.stdout == ""


def test_kafka_configs_users_and_clients(cli_broker: BrokerProcess) -> None:
    b = ["--bootstrap-server", cli_broker.bootstrap]
    done = odradek("kafka-configs", *b, "--alter", "--entity-type", "users", "--entity-name",
                   "carol", "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "producer_byte_rate=4096")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating config for user carol."
    done = odradek("kafka-configs", *b, "--alter", "--client-defaults",
                   "--add-config", "consumer_byte_rate=8192")
    assert done.returncode == 0, done.stderr
    shown = odradek("kafka-configs", *b, "--describe", "--user", "carol", "--client", "app")
    assert shown.stdout.strip() == ("Quota configs for user-principal 'carol', client-id 'app' "
                                    "are producer_byte_rate=4096.0")
    shown = odradek("kafka-configs", *b, "--describe", "--entity-type", "clients",
                    "--entity-default")
    assert shown.stdout.startswith("Quota configs for the default client-id are "
                                   "consumer_byte_rate=8192.0")
    # SCRAM credentials are ConfigCommand's too (AlterUserScramCredentials); not mixed
    # with quotas in one --alter
    done = odradek("kafka-configs", *b, "--alter", "--entity-type", "users", "--entity-name",
                   "carol", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=x]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating config for user carol."
    refused = odradek("kafka-configs", *b, "--alter", "--entity-type", "users", "--entity-name",
                      "carol", "--add-config", "SCRAM-SHA-512=[password=x],producer_byte_rate=1")
    assert refused.returncode == 1 and "SCRAM-SHA-512" in refused.stderr
    # the entry point a user types
    shown = subprocess.run([sys.executable, "-m", "odradek", "kafka-configs", *b, "--describe",
                            "--entity-type", "users", "--entity-name", "carol",
                            "--entity-type", "clients", "--entity-name", "app"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, COLUMNS="200"))
    assert shown.returncode == 0, shown.stderr
    assert "producer_byte_rate=4096.0" in shown.stdout
