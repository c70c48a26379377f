"""The console against a three-broker ZooKeeper cluster: a killed broker turns the
overview red (under-replicated partitions) within 10 s, and green after its restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from selenium.webdriver.common.by import By

from tests.cluster.harness import Cluster, quiet_stderr
from tests.console.conftest import ConsoleProcess, screenshot, wait_for


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(tmp_path / "cluster", size=3) as c, quiet_stderr():
        yield c


def _card(driver: Any) -> tuple[str, str]:
    card = driver.find_element(By.ID, "under-replicated-card")
    return card.find_element(By.CSS_SELECTOR, ".v").text, card.get_attribute("class")


def test_killed_broker_turns_the_overview_red_then_green(cluster: Cluster, browser: Any,
                                                         tmp_path: Path) -> None:
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()  # kept: a collected client abandons its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    console = ConsoleProcess(cluster.bootstrap, tmp_path / "console.log",
                             "--lake-catalog-uri", f"sqlite:///{tmp_path / 'none.db'}")
    try:
        console.start()
        browser.get(console.url + "/")
        wait_for(lambda: _card(browser) == ("0", "card good"), 30, "a green overview")
        assert browser.find_element(By.ID, "broker-count").text == "3"

        killed = time.monotonic()
        cluster.kill(3)
        wait_for(lambda: "bad" in _card(browser)[1] and int(_card(browser)[0]) >= 3, 10,
                 "under-replicated partitions shown")  # the page is live: no reload
        red_after = time.monotonic() - killed
        print(f"overview red {red_after:.1f} s after the kill")
        screenshot(browser, "overview-broker-down")

        cluster.start(3)
        wait_for(lambda: _card(browser) == ("0", "card good"), 60, "green after the restart")
        assert red_after < 10
    finally:
        console.stop()
