"""The console against a SASL-secured broker: it authenticates with --command-config,
works, and never shows the secret."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess, wait_for

SECRET = "admin-secret-" + uuid.uuid4().hex[:6]


class SaslBroker(BrokerProcess):
    def command(self) -> list[str]:
        cmd = super().command()
        return [c.replace("PLAINTEXT://", "SASL_PLAINTEXT://") for c in cmd]


@pytest.fixture
def sasl_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{SECRET}" user_admin="{SECRET}";')
    b = SaslBroker(tmp_path / "data", overrides={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_console_authenticates_with_the_command_config_and_hides_the_secret(
        sasl_broker: BrokerProcess, browser: Any, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     f"sasl.username=admin\nsasl.password={SECRET}\n")
    console = ConsoleProcess(sasl_broker.bootstrap, tmp_path / "console.log",
                             "--command-config", str(props),
                             "--lake-catalog-uri", f"sqlite:///{tmp_path / 'none.db'}")
    try:
        console.start()
        name = f"secured-{uuid.uuid4().hex[:6]}"
        browser.get(console.url + "/topics")
        browser.find_element(By.CSS_SELECTOR, "#create-topic summary").click()
        browser.find_element(By.ID, "new-topic-name").send_keys(name)
        browser.find_element(By.ID, "create-topic-button").click()
        wait_for(lambda: f"created topic {name}" in browser.find_element(By.ID, "notice").text,
                 what="the topic created through SASL")
        pages = ["/", "/topics", f"/topics/{name}", "/brokers?all=1", "/groups", "/health",
                 "/transactions"]
        for page in pages:
            browser.get(console.url + page)
            assert SECRET not in browser.page_source, page
        assert "PLAINTEXT listener" in browser.find_element(By.ID, "error").text
        browser.get(console.url + "/")
        assert browser.find_element(By.ID, "broker-count").text == "1"
        assert browser.find_elements(By.ID, "sampler-error") == []
    finally:
        console.stop()
