"""`odradek schemas list/get/register/check/delete` against a running registry."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_schemas_commands(registry: RegistryProcess, subject: str, tmp_path: Path) -> None:
    v1 = tmp_path / "v1.avsc"
    v1.write_text(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}]}))
    bad = tmp_path / "bad.avsc"
    bad.write_text(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}]}))
    url = ["--registry-url", registry.url]

    done = odradek("schemas", "register", subject, str(v1), *url)
    assert done.returncode == 0, done.stderr
    assert "version 1" in done.stdout
    listed = odradek("schemas", "list", "--prefix", subject, *url)
    assert subject in listed.stdout
    got = odradek("schemas", "get", subject, *url)
    assert json.loads(got.stdout)["version"] == 1

    check = odradek("schemas", "check", subject, str(bad), *url)
    assert check.returncode == 1 and "incompatible" in check.stderr
    refused = odradek("schemas", "register", subject, str(bad), *url)
    assert refused.returncode == 1 and "40901" in refused.stderr
    assert odradek("schemas", "check", subject, str(v1), *url).returncode == 0

    missing = odradek("schemas", "get", f"{subject}-none", *url)
    assert missing.returncode == 1 and "40401" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1

    assert odradek("schemas", "delete", subject, *url).returncode == 0
    gone = odradek("schemas", "delete", subject, "--permanent", *url)
    assert gone.returncode == 0 and "[1]" in gone.stdout
    unreachable = odradek("schemas", "list", "--registry-url", "http://127.0.0.1:9")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr


def test_schema_registry_refuses_bad_options(registry: RegistryProcess) -> None:
    done = odradek("schema-registry", "--compatibility", "SIDEWAYS")
    assert done.returncode != 0 and "--compatibility" in done.stderr
    taken = odradek("schema-registry", "-b", registry.bootstrap, "--listeners", registry.url)
    assert taken.returncode == 1
    assert taken.stderr.strip() == (f"error: cannot listen on 127.0.0.1:{registry.port}: "
                                    "Address already in use")


def test_schema_registry_stops_on_sigint_even_started_in_the_background(
        broker: BrokerProcess, tmp_path: Path) -> None:
    r = RegistryProcess(broker.bootstrap, tmp_path, "_schemas-sigint", "sr-sigint")
    try:
        r.start(ignore_sigint=True)
        assert r.proc is not None
        r.proc.send_signal(signal.SIGINT)
        assert r.proc.wait(30) == 0
    finally:
        r.stop()
