"""A Spark standalone cluster on loopback, from the classes inside the pyspark package:
one master and N workers, each a JVM of its own (`spark-class …deploy.master.Master` /
`…deploy.worker.Worker`), as an operator runs them with `sbin/start-master.sh`.

    with standalone_cluster(tmp_path, workers=1) as cluster:
        run `odradek lake ingest --master cluster.master_url …`
        cluster.executor_pids()  # the executor JVMs the workers launched

Everything binds 127.0.0.1 (SPARK_LOCAL_IP), and every process is stopped on leaving,
its executors with it (they run in the worker's process group).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.processes import started, wait_for_output

SRC = str(Path(__file__).resolve().parents[3] / "src")
# an application's executors, small: the machine is shared; one executor of one core and
# 512 MiB (spark-submit --conf pairs)
SMALL_EXECUTOR = ["--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                  "--conf", "spark.executor.cores=1"]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def cluster_env(work: Path) -> dict[str, str]:
    """What the daemons and so their executors run with: loopback only, this tree's
    odradek on the Python path, the interpreter that has the pipeline's packages."""
    home = spark_home()
    return dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
                SPARK_LOG_DIR=str(work / "logs"), SPARK_WORKER_DIR=str(work / "work"),
                SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable,
                PYTHONPATH=os.pathsep.join(
                    p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p))


@dataclass
class Cluster:
    master_url: str
    web_url: str
    work: Path
    worker_pids: list[int] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=10) as reply:
            return dict(json.load(reply))

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def executor_pids(self) -> list[int]:
        """The executor JVMs (CoarseGrainedExecutorBackend) our workers started."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            if b"CoarseGrainedExecutorBackend" in cmdline and ppid in self.worker_pids:
                pids.append(int(entry.name))
        return sorted(pids)


def _wait(what: str, ready: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            if ready():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not ready within {timeout:.0f}s")
        time.sleep(0.2)


@contextlib.contextmanager
def standalone_cluster(work: Path, workers: int = 1, cores: int = 2,
                       memory: str = "1g") -> Iterator[Cluster]:
    work.mkdir(parents=True, exist_ok=True)
    env = cluster_env(work)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, web = free_port(), free_port()
    master_cmd = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                  "--port", str(port), "--webui-port", str(web)]
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", work)
    with contextlib.ExitStack() as stack:
        log = work / "master.log"
        master = stack.enter_context(started(master_cmd, log, env=env))
        wait_for_output(master, log, r"I have been elected leader|ALIVE", timeout=120)
        for n in range(workers):
            log = work / f"worker-{n}.log"
            cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                   "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                   "--webui-port", str(free_port()), "--work-dir", str(work / f"work-{n}")]
            proc = stack.enter_context(started(cmd, log, env=env))
            cluster.worker_pids.append(proc.pid)
        _wait("the workers", lambda: cluster.alive_workers() == workers, timeout=120)
        yield cluster


@dataclass
class EventLog:
    """What the application's event log (spark.eventLog.*) says about where tasks ran."""

    records_read: dict[str, int] = field(default_factory=dict)  # per executor id
    tasks: dict[str, int] = field(default_factory=dict)  # tasks ended, per executor id
    executors_added: int = 0
    tasks_lost: int = 0  # tasks that failed because their executor went away

    @classmethod
    def read(cls, directory: Path) -> EventLog:
        out = cls()
        for path in directory.rglob("events_*"):
            for line in path.read_text().splitlines():
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerExecutorAdded":
                    out.executors_added += 1
                if kind != "SparkListenerTaskEnd":
                    continue
                if event.get("Task End Reason", {}).get("Reason") == "ExecutorLostFailure":
                    out.tasks_lost += 1
                executor = event["Task Info"]["Executor ID"]
                metrics = event.get("Task Metrics") or {}
                records = int(metrics.get("Input Metrics", {}).get("Records Read", 0))
                out.records_read[executor] = out.records_read.get(executor, 0) + records
                out.tasks[executor] = out.tasks.get(executor, 0) + 1
        return out


def running_tasks(cluster_work: Path) -> set[str]:
    """Tasks an executor of the cluster has started and not finished, from the executors'
    own logs under the workers' work folders ("Running task 0.0 in stage 3.0 (TID 6)")."""
    running: set[str] = set()
    for log in cluster_work.glob("work-*/app-*/*/stderr"):
        text = log.read_text(errors="replace")
        started = set(re.findall(r"Running task \S+ in stage \S+ \(TID (\d+)\)", text))
        ended = set(re.findall(r"(?:Finished|Exception in|Killed) task .*?\(TID (\d+)\)",
                               text))
        running |= {f"{log.parent.name}/{tid}" for tid in started - ended}
    return running


def event_log_conf(event_log_dir: Path) -> list[str]:
    event_log_dir.mkdir(parents=True, exist_ok=True)
    return ["--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false",
            "--conf", f"spark.eventLog.dir={event_log_dir.as_uri()}"]


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 9)
