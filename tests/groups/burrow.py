"""Debian's Burrow 1.2.1 pointed at a broker: a process and its lag API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.processes import reap_on_exit

BURROW = "/usr/bin/Burrow"
CLUSTER = "local"


def burrow_available() -> bool:
    return shutil.which(BURROW) is not None or Path(BURROW).exists()


class BurrowProcess:
    def __init__(self, base: Path, bootstrap: str, zookeeper: str,
                 kafka_version: str = "2.0.0") -> None:
        self.dir = base
        self.bootstrap = bootstrap
        self.zookeeper = zookeeper
        self.kafka_version = kafka_version
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def _config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        (self.dir / "burrow.toml").write_text(f"""
[general]
pidfile="{self.dir}/burrow.pid"
stdout-logfile="{self.dir}/burrow.out"

[logging]
filename="{self.dir}/logs/burrow.log"
level="debug"

[zookeeper]
servers=["{self.zookeeper}"]
timeout=6
root-path="/burrow"

[client-profile.odradek]
client-id="burrow-test"
kafka-version="{self.kafka_version}"

[cluster.{CLUSTER}]
class-name="kafka"
servers=["{self.bootstrap}"]
client-profile="odradek"
topic-refresh=2
offset-refresh=1

[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
servers=["{self.bootstrap}"]
client-profile="odradek"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="127.0.0.1:{self.port}"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
""")

    def start(self) -> BurrowProcess:
        self._config()
        out = open(self.dir / "stdout.log", "ab")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen([BURROW, "-config-dir", str(self.dir)], stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.dir)
        reap_on_exit(self.proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Burrow exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                self.get("/burrow/admin")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        self.stop()  # never leave it running behind the failure
        raise RuntimeError(f"Burrow did not start:\n{self.logs()}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            body = r.read()
        try:
            return json.loads(body)
        except ValueError:
            return body.decode()

    def lag(self, group: str) -> Any:
        return self.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")

    def logs(self) -> str:
        text = ""
        for name in ("stdout.log", "burrow.out", "logs/burrow.log"):
            path = self.dir / name
            if path.exists():
                text += f"--- {name}\n" + path.read_text(errors="replace")[-4000:]
        return text

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
