"""Basic authentication: Confluent's password-file format, confluent-kafka's
`basic.auth.user.info`, 401 without credentials, and writes forwarded with them."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from tests.conftest import BrokerProcess
from tests.registry.conftest import RegistryProcess


def test_basic_auth_guards_every_instance(broker: BrokerProcess, tmp_path: Path) -> None:
    users = tmp_path / "password.properties"
    users.write_text("# user: password,roles\nalice: s3cret,admin\nbob: hunter2\n")
    tag = uuid.uuid4().hex[:8]
    auth = ["--basic-auth-file", str(users)]
    first = RegistryProcess(broker.bootstrap, tmp_path, f"_schemas-{tag}", f"sr-{tag}",
                            extra=auth)
    second = RegistryProcess(broker.bootstrap, tmp_path, f"_schemas-{tag}", f"sr-{tag}",
                             extra=auth)
    try:
        first.start()
        second.start()
        denied = httpx.get(f"{first.url}/subjects", timeout=10)
        assert denied.status_code == 401 and denied.json()["error_code"] == 401
        assert denied.headers["www-authenticate"].startswith("Basic")
        assert httpx.get(f"{first.url}/subjects", auth=("alice", "wrong"),
                         timeout=10).status_code == 401

        schema = Schema('{"type": "record", "name": "R", "fields": '
                        '[{"name": "a", "type": "int"}]}', "AVRO")
        for instance in (first, second):  # one of them forwards, credentials and all
            client = SchemaRegistryClient({"url": instance.url,
                                           "basic.auth.user.info": "bob:hunter2"})
            deadline_ok = False
            for _ in range(300):
                try:
                    client.register_schema(f"s-{instance.port}", schema)
                    deadline_ok = True
                    break
                except SchemaRegistryError as e:
                    assert e.error_code == 50004, e  # only "no leader yet" may repeat
            assert deadline_ok
        anonymous = SchemaRegistryClient({"url": first.url})
        with pytest.raises(SchemaRegistryError) as e:
            anonymous.get_subjects()
        assert e.value.http_status_code == 401

        env = dict(os.environ, ODRADEK_SCHEMA_REGISTRY_USER_INFO="alice:s3cret")
        listed = subprocess.run([sys.executable, "-m", "odradek", "schemas", "list",
                                 "--registry-url", second.url], capture_output=True,
                                text=True, env=env, timeout=60, check=False)
        assert listed.returncode == 0 and f"s-{first.port}" in listed.stdout
    finally:
        first.stop()
        second.stop()


def test_a_password_file_it_cannot_honour_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "password.properties"
    users.write_text("alice: MD5:164c88b302622e17050af52c89945d44,admin\n")
    done = subprocess.run([sys.executable, "-m", "odradek", "schema-registry",
                           "--basic-auth-file", str(users)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1 and "only plain passwords" in done.stderr
