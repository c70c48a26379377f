"""Real things for the console's tests: a broker, `odradek console` as a user starts it,
and Debian's headless Chromium driven through chromedriver (selenium)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerProcess, free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# Screenshots go to docs/console/ only when asked (ODRADEK_CONSOLE_SHOTS=docs/console), so
# an ordinary run leaves the tree clean.
SHOTS = Path(os.environ.get("ODRADEK_CONSOLE_SHOTS")
             or Path(tempfile.gettempdir()) / "odradek-console-shots")


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "the condition"
             ) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception:  # a page mid-swap, a stale element: look again
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.2)


class ConsoleProcess:
    """`odradek console` in a child process of its own session."""

    def __init__(self, bootstrap: str, log_path: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.args = [sys.executable, "-m", "odradek", "console", "--bootstrap-server",
                     bootstrap, "--port", str(self.port), "--refresh", "1", *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> ConsoleProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"console exited:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        wait_for(up, timeout, "the console answering")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def chromium() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="odradek-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.profile_dir = profile
    return driver


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("console-broker") / "data"
    b = BrokerProcess(data, overrides={"metrics.port": str(free_port()),
                                       "group.initial.rebalance.delay.ms": "0"})
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def console(metrics_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ConsoleProcess]:
    log = tmp_path_factory.mktemp("console") / "console.log"
    c = ConsoleProcess(metrics_broker.bootstrap, log,
                       "--lake-catalog-uri", f"sqlite:///{log.parent / 'none.db'}")
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("chromium and chromedriver are needed: run scripts/install-system-deps")
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(driver.profile_dir, ignore_errors=True)


def screenshot(driver: Any, name: str) -> None:
    """Each page's picture for docs/console/ (shown in README)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
