"""A local ZooKeeper from Debian's `zookeeper` package (3.8), for `odradek cluster up` and
the tests: one node, or an ensemble on loopback.

Started in the foreground with QuorumPeerMain (zkServer.sh logs nothing); ready when
the `srvr` four-letter word answers with a `Mode:` line.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")


def zookeeper_available() -> bool:
    return shutil.which("java") is not None and all(Path(j).exists() for j in ZOOKEEPER_JARS)


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperProcess:
    """One ZooKeeper node; `peers` are (my id, quorum port, election port) for ensembles."""

    def __init__(self, data_dir: Path, port: int | None = None, my_id: int = 1,
                 peers: list[tuple[int, int, int]] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.my_id = my_id
        self.peers = peers or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"zookeeper-{self.port}.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=500",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            "maxSessionTimeout=20000",
        ]
        for node_id, quorum, election in self.peers:
            lines.append(f"server.{node_id}=127.0.0.1:{quorum}:{election}")
        if self.peers:
            (self.data_dir / "myid").write_text(f"{self.my_id}\n")
        config = self.data_dir.parent / f"zoo-{self.port}.cfg"
        config.write_text("\n".join(lines) + "\n")
        return config

    def start(self, timeout: float = 30.0, wait: bool = True) -> ZooKeeperProcess:
        config = self._write_config()
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            # C1 only and the serial collector: a local node needs no peak throughput,
            # and they cut the JVM's start-up CPU (ready 1.2-1.4 s vs 1.6-2.0 s, busy machine)
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             "-cp", ":".join(ZOOKEEPER_JARS),
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)],
            stdout=log, stderr=subprocess.STDOUT)
        if wait:
            try:
                self.wait_ready(timeout)
            except BaseException:  # not ready (or interrupted): never leave it running
                self.stop()
                raise
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}:\n"
                                   f"{self.logs()}")
            try:
                if "Mode:" in four_letter_word(self.port, "srvr", 0.5):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"zookeeper did not start within {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @staticmethod
    def ensemble(base: Path, size: int) -> list[ZooKeeperProcess]:
        """`size` nodes configured as one ensemble (not started)."""
        peers = [(i + 1, free_port(), free_port()) for i in range(size)]
        return [ZooKeeperProcess(base / f"zk{i + 1}", my_id=i + 1, peers=peers)
                for i in range(size)]
