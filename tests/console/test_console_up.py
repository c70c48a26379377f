"""`odradek up` starts the console beside the pipeline and prints its URL."""

from __future__ import annotations

import io
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from rich.console import Console

from odradek.cli import up
from tests.conftest import BrokerProcess


def test_up_starts_the_console_on_8080_or_a_free_port_and_prints_its_url(
        metrics_broker: BrokerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(up, "console", Console(file=out, width=200))
    with socket.socket() as taken:  # whatever holds 8080 here, the console finds a port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(up, "CONSOLE_PORT", taken.getsockname()[1])
        web = up._start_console(metrics_broker.bootstrap, tmp_path / "pipeline")
    try:
        url = re.search(r"console on (http://\S+)", out.getvalue())
        assert url is not None and url.group(1) == web.url
        assert web.port != up.CONSOLE_PORT
        with urllib.request.urlopen(web.url + "lake", timeout=30) as r:
            page = r.read().decode()
        assert str(tmp_path / "pipeline" / "lake" / "catalog.db") in page
    finally:
        web.stop()
