"""`odradek lake ingest` started with SIGINT ignored (as `make test &` starts it) stops
after its current batch on SIGTERM, and its Spark JVM goes with it. (SIGINT takes the
same way out; tests/cli/test_signals.py covers it on commands that start faster.)"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import create_topic, produce_values, topic
from tests.processes import started, stop, wait_for_output


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_lake_ingest_stops_gracefully_on_sigterm(bootstrap: str, tmp_path: Path) -> None:
    name = create_topic(bootstrap, topic("sig"))
    produce_values(bootstrap, name, [json.dumps({"n": i}) for i in range(20)])
    log = tmp_path / "ingest.log"
    cmd = [sys.executable, "-m", "odradek", "lake", "ingest", "--bootstrap-server", bootstrap,
           "--topic", name, "--table", "iot.signals", "--data-dir", str(tmp_path / "lake"),
           "--trigger-interval", "300 milliseconds"]
    with started(cmd, log, sigint_ignored=True) as proc:
        wait_for_output(proc, log, r"batch \d+: 20 rows", timeout=240)
        assert stop(proc, signal.SIGTERM, timeout=120) == 0, log.read_text()[-3000:]
    assert "done: 20 rows" in log.read_text()
