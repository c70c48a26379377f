"""The console in real headless Chromium against a real broker: what a user clicks."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from selenium.webdriver.common.by import By

from tests.conftest import BrokerProcess
from tests.console.conftest import ConsoleProcess, screenshot, wait_for


def _text(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _fill(driver: Any, form: str, **fields: str) -> None:
    for name, value in fields.items():
        el = driver.find_element(By.CSS_SELECTOR, f"{form} [name={name}]")
        el.clear()
        el.send_keys(value)


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    return name


def _produce(bootstrap: str, topic: str, n: int, value: bytes = b'{"n": 1}') -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=value, key=f"k{i}".encode())
    assert p.flush(20) == 0


def _commit(bootstrap: str, group: str, topic: str, partitions: int, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, offset) for p in range(partitions)],
                 asynchronous=False)
    finally:
        c.close()


def test_create_a_topic_produce_and_browse_a_message(console: ConsoleProcess, browser: Any,
                                                       metrics_broker: BrokerProcess) -> None:
    name = f"created-{uuid.uuid4().hex[:6]}"
    browser.get(console.url + "/topics")
    browser.find_element(By.CSS_SELECTOR, "#create-topic summary").click()
    _fill(browser, "#create-topic", name=name, partitions="3")
    browser.find_element(By.ID, "create-topic-button").click()
    wait_for(lambda: f"created topic {name}" in _text(browser, "#notice"), what="creation")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tr")) == 4  # header + 3

    _fill(browser, "#produce-form", key="device-7", value='{"temperature": 21.5}',
          headers="source=console\ntrace=abc")
    browser.find_element(By.ID, "produce-button").click()
    wait_for(lambda: "produced to partition" in _text(browser, "#notice"), what="produce")
    row = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#messages tr.message"))[0]
    assert "device-7" in row.find_element(By.CSS_SELECTOR, ".key").text
    value = row.find_element(By.CSS_SELECTOR, ".value pre")
    assert json.loads(value.text) == {"temperature": 21.5}
    assert value.get_attribute("class") == "json"
    assert "source=console" in row.find_element(By.CSS_SELECTOR, ".headers").text
    screenshot(browser, "messages")

    # a real client sees what the console produced
    c = Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": "check",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([name])
        msg = wait_for(lambda: c.poll(0.5), what="the produced record")
        assert msg.key() == b"device-7"
        assert dict(msg.headers()) == {"source": b"console", "trace": b"abc"}
    finally:
        c.close()

    browser.get(console.url + f"/topics/{name}")
    screenshot(browser, "topic")
    browser.get(console.url + f"/topics?q={name}")
    wait_for(lambda: name in _text(browser, "#topics"), what="the topic in the list")
    screenshot(browser, "topics")


def test_group_lag_rises_and_falls_live_and_reset_with_preview(
        console: ConsoleProcess, browser: Any, metrics_broker: BrokerProcess) -> None:
    bootstrap = metrics_broker.bootstrap
    topic = _topic(bootstrap, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    _commit(bootstrap, group, topic, 2, 0)
    browser.get(console.url + f"/groups/{group}")
    wait_for(lambda: _text(browser, "#total-lag") == "0", what="lag 0")

    _produce(bootstrap, topic, 100)  # the page is not reloaded: the live region follows
    wait_for(lambda: _text(browser, "#total-lag") == "100", what="lag rising to 100")
    _commit(bootstrap, group, topic, 2, 50)  # both partitions together hold 100 records
    wait_for(lambda: int(_text(browser, "#total-lag")) < 100, what="lag falling")
    wait_for(lambda: int(browser.find_element(By.CSS_SELECTOR, ".chart").get_attribute(
        "data-points") or 0) >= 2, what="the lag chart drawing points")
    screenshot(browser, "group")

    browser.find_element(By.CSS_SELECTOR, "#reset-strategy option[value=earliest], "
                         "#reset-strategy option:first-child").click()
    browser.find_element(By.ID, "preview-button").click()
    rows = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#preview tr")[1:],
                    what="the preview")
    assert [r.find_element(By.CSS_SELECTOR, ".new-offset").text for r in rows] == ["0", "0"]
    assert "error" not in browser.page_source.lower().split("<main>")[1][:200]
    browser.find_element(By.ID, "apply-button").click()
    wait_for(lambda: "reset 2 partition(s)" in _text(browser, "#notice"), what="the reset")
    wait_for(lambda: _text(browser, "#total-lag") == "100", what="lag back to 100")

    browser.get(console.url + "/groups")
    wait_for(lambda: group in _text(browser, "#groups"), what="the group in the list")
    screenshot(browser, "groups")


def test_overview_brokers_health_and_live_throughput(console: ConsoleProcess, browser: Any,
                                                     metrics_broker: BrokerProcess) -> None:
    topic = _topic(metrics_broker.bootstrap)
    browser.get(console.url + "/")
    assert _text(browser, "#under-replicated") == "0"
    assert "good" in browser.find_element(By.ID, "under-replicated-card").get_attribute("class")
    assert "controller" in _text(browser, "#brokers")
    _produce(metrics_broker.bootstrap, topic, 50, b"x" * 1000)
    # bytes in/s comes from the broker's Prometheus endpoint, found through its configs
    wait_for(lambda: "Prometheus" in browser.page_source, what="the metrics endpoint found")
    wait_for(lambda: int(browser.find_elements(By.CSS_SELECTOR, ".chart")[0].get_attribute(
        "data-points") or 0) >= 2, what="the throughput chart")
    screenshot(browser, "overview")
    browser.get(console.url + "/brokers")
    assert "log.dirs" in _text(browser, "#broker-configs")
    screenshot(browser, "brokers")
    browser.get(console.url + "/health")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#alarms li"), what="alarms")
    screenshot(browser, "health")
    txn = Producer({"bootstrap.servers": metrics_broker.bootstrap,
                    "transactional.id": f"tx-{topic}"})
    txn.init_transactions(20)
    txn.begin_transaction()
    txn.produce(topic, b"open")
    txn.flush(20)
    try:
        browser.get(console.url + "/transactions")
        wait_for(lambda: f"tx-{topic}" in _text(browser, "#ongoing"), what="the transaction")
        assert "Ongoing" in _text(browser, "#ongoing")
        wait_for(lambda: "checked" in _text(browser, "#scan-state"), what="the hanging scan")
        assert "none" in _text(browser, "#hanging")  # open, but its coordinator has it
        screenshot(browser, "transactions")
    finally:
        txn.abort_transaction(20)


def test_bad_input_is_one_line_and_nothing_changes(console: ConsoleProcess, browser: Any,
                                                   metrics_broker: BrokerProcess) -> None:
    topic = _topic(metrics_broker.bootstrap)
    _produce(metrics_broker.bootstrap, topic, 1, b"\xff\xfe not utf-8")
    _produce(metrics_broker.bootstrap, topic, 1, b"{" * 100_000)  # huge, not JSON
    browser.get(console.url + f"/topics/{topic}/messages?offset=abc")
    assert _text(browser, "#error") == "offset must be a whole number, got 'abc'"
    browser.get(console.url + f"/topics/{topic}/messages?timestamp=yesterday")
    assert "timestamp must be" in _text(browser, "#error")
    browser.get(console.url + f"/topics/{topic}/messages?partition=0&offset=0")
    values = browser.find_elements(By.CSS_SELECTOR, "#messages td.value")
    assert "not valid UTF-8" in values[0].text and "ff fe" in values[0].text
    assert "cut:" in values[1].text

    # a POST without the CSRF token is refused, and a GET never mutates
    req = urllib.request.Request(console.url + f"/topics/{topic}/delete",
                                 data=urllib.parse.urlencode({"confirm": topic}).encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=10)
    assert refused.value.code == 403
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(console.url + f"/topics/{topic}/delete?confirm={topic}",
                               timeout=10)
    admin = AdminClient({"bootstrap.servers": metrics_broker.bootstrap})
    assert topic in admin.list_topics(timeout=10).topics

    # deleting needs the name typed; then the page of the deleted topic says so
    browser.get(console.url + f"/topics/{topic}")
    _fill(browser, "#delete-form", confirm="wrong")
    browser.find_element(By.CSS_SELECTOR, "#delete-form button").click()
    wait_for(lambda: "type the topic's name" in _text(browser, "#notice"), what="refusal")
    _fill(browser, "#delete-form", confirm=topic)
    browser.find_element(By.CSS_SELECTOR, "#delete-form button").click()
    wait_for(lambda: f"deleted topic {topic}" in _text(browser, "#notice"), what="deletion")
    browser.get(console.url + f"/topics/{topic}")
    assert "does not exist" in _text(browser, "#error")


def test_a_topic_deleted_while_viewed_is_said_in_one_line(console: ConsoleProcess,
                                                         browser: Any,
                                                         metrics_broker: BrokerProcess) -> None:
    topic = _topic(metrics_broker.bootstrap, partitions=2)
    admin = AdminClient({"bootstrap.servers": metrics_broker.bootstrap})
    admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, topic, incremental_configs=[ConfigEntry(
            "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])]
    )[ConfigResource(ConfigResource.Type.TOPIC, topic)].result(10)
    browser.get(console.url + f"/topics?q={topic}")
    wait_for(lambda: "retention.ms" in _text(browser, "#topics .overrides"), 45,
             "the topic's own config listed")
    browser.get(console.url + f"/topics/{topic}")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tr")) == 3
    admin.delete_topics([topic])[topic].result(10)
    wait_for(lambda: "does not exist" in _text(browser, "#error"), 20,
             "the live page saying the topic is gone")
    assert browser.find_elements(By.CSS_SELECTOR, "#partitions") == []


def test_read_only_console_hides_and_refuses_mutations(
        metrics_broker: BrokerProcess, browser: Any, tmp_path: Any) -> None:
    topic = _topic(metrics_broker.bootstrap)
    ro = ConsoleProcess(metrics_broker.bootstrap, tmp_path / "ro.log", "--read-only",
                        "--lake-catalog-uri", f"sqlite:///{tmp_path / 'none.db'}")
    try:
        ro.start()
        browser.get(ro.url + f"/topics/{topic}")
        assert "read-only" in _text(browser, "header")
        assert browser.find_elements(By.CSS_SELECTOR, "form[method=post]") == []
        req = urllib.request.Request(ro.url + f"/topics/{topic}/delete",
                                     data=b"confirm=" + topic.encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 403
        admin = AdminClient({"bootstrap.servers": metrics_broker.bootstrap})
        assert topic in admin.list_topics(timeout=10).topics
    finally:
        ro.stop()


def test_share_groups_page_shows_members_start_offset_and_lag_live(
        console: ConsoleProcess, browser: Any, metrics_broker: BrokerProcess) -> None:
    from confluent_kafka import AcknowledgeType

    from tests.share.helpers import earliest_group, poll_until, share_consumer

    bootstrap = metrics_broker.bootstrap
    topic = _topic(bootstrap)
    group = earliest_group(bootstrap)
    _produce(bootstrap, topic, 5)
    row = f"#share-groups tr.group[data-group='{group}']"
    with share_consumer(bootstrap, group, topic) as c:
        got = poll_until(c, lambda seen: len(seen) >= 5)
        for m in got:  # the first two done, the rest back to the queue
            c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 2
                          else AcknowledgeType.RELEASE)
        assert all(e is None for e in c.commit_sync(30).values())
        browser.get(console.url + "/share-groups")
        wait_for(lambda: _text(browser, row + " .members") == "1", what="one member")
        assert _text(browser, row + " .start") == "2"
        assert _text(browser, row + " .lag") == "3"
        assert topic in _text(browser, row)
        screenshot(browser, "share_groups")
    # the page is not reloaded: the live region sees the member leave
    wait_for(lambda: _text(browser, row + " .members") == "0", what="the member leaving")
    assert "Empty" in _text(browser, row)
