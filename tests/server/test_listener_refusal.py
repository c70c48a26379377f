"""A broker asked for a protection it cannot give refuses to start, in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("override", [
    "listeners=SASL_SSL://127.0.0.1:0",
    "client.quota.callback.class=com.example.Quotas",
])
def test_broker_with_an_unserved_security_setting_exits_with_one_line(
        tmp_path: Path, override: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek", "broker", "--override", f"log.dirs={tmp_path}/data",
         "--override", override],
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:")
    assert "ssl.keystore.location" in lines[0] or "client.quota.callback.class" in lines[0]
    assert "listening on" not in result.stderr + result.stdout
    assert not (tmp_path / "data").exists()  # nothing half-created
