"""The lake page against a real Spark ingest: an Iceberg table and its snapshot, with the
Kafka offsets it committed, appear on the live page. Spark is costly: one short test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess, screenshot, wait_for
from tests.console.test_console_browser import _produce, _topic

pytest.importorskip("pyspark")
pytest.importorskip("pyiceberg")


def test_an_ingested_snapshot_appears_on_the_lake_page(metrics_broker: BrokerProcess,
                                                       browser: Any, tmp_path: Path) -> None:
    topic = _topic(metrics_broker.bootstrap, partitions=2)
    _produce(metrics_broker.bootstrap, topic, 40,
             json.dumps({"device_id": "th-1", "temperature": 21.5}).encode())
    home = tmp_path / "home"
    lake = home / "lake"  # the data home's layout
    console = ConsoleProcess(metrics_broker.bootstrap, tmp_path / "console.log",
                             "--lake-catalog-uri", f"sqlite:///{lake / 'catalog.db'}")
    try:
        console.start()
        browser.get(console.url + "/lake")
        assert "no lake catalog" in browser.find_element(By.ID, "error").text

        ingest = subprocess.run(
            [sys.executable, "-m", "odradek", "lake", "ingest", "--table", "iot.events",
             "--topic", topic, "--bootstrap-server", metrics_broker.bootstrap,
             "--data-dir", str(home), "--available-now"],
            capture_output=True, text=True, timeout=240,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        assert ingest.returncode == 0, ingest.stdout[-2000:] + ingest.stderr[-3000:]

        browser.get(console.url + f"/lake?q=temperature&x={uuid.uuid4().hex[:4]}")
        wait_for(lambda: "iot.events" in browser.find_element(By.ID, "tables").text, 30,
                 "the table listed")
        assert "temperature" in browser.find_element(By.ID, "hits").text  # column search
        screenshot(browser, "lake")
        browser.find_element(By.LINK_TEXT, "iot.events").click()
        wait_for(lambda: browser.find_element(By.ID, "table-rows").text == "40", 30,
                 "the table's rows")
        snapshots = browser.find_element(By.ID, "snapshots").text
        assert f"{topic}: 0→" in snapshots  # the Kafka offsets the snapshot committed
        assert "temperature" in browser.find_element(By.ID, "columns").text
        screenshot(browser, "lake-table")
    finally:
        console.stop()
