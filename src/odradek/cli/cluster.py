"""`odradek cluster up`: a replicated cluster on this machine, for trying things out.

N broker processes (`odradek broker` each, node.id 1..N, ports base..base+N-1), on a
ZooKeeper given with --zookeeper, or else one started here from Debian's `zookeeper`
package with its data next to the brokers'. Each broker's output goes to
<data-dir>/broker-<id>.log. The internal topics and new topics get replication
factor min(3, N). Ctrl-C stops the brokers (cleanly, so leadership moves at once),
then the ZooKeeper it started.

With --secure the brokers listen on SASL_SSL only, with ACLs, and the command prints
the client.properties to use (cli/cluster_secure.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import typer

from odradek.cli.common import console, fail, parse_pairs
from odradek.cli.signals import long_running

app = typer.Typer(no_args_is_help=True, help="Run a local multi-broker cluster on ZooKeeper.")


def broker_properties(node_id: int, port: int, data_dir: Path, zookeeper: str, brokers: int,
                      extra: dict[str, str]) -> dict[str, str]:
    rf = str(min(3, brokers))
    return {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir / f"broker-{node_id}"),
        "zookeeper.connect": zookeeper,
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": str(min(2, brokers)),
        **extra,
    }


def _serving(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


@app.command("up")
@long_running
def up(
    brokers: int = typer.Option(3, "--brokers", "-n", min=1, help="How many brokers"),
    zookeeper: str | None = typer.Option(
        None, "--zookeeper", help="HOST:PORT[/chroot] of a running ZooKeeper; without it "
        "one is started here"),
    data_dir: Path = typer.Option(Path("odradek-cluster"), "--data-dir",
                                  help="Where the brokers' (and ZooKeeper's) data live"),
    base_port: int = typer.Option(9092, "--base-port", help="Port of broker 1"),
    zookeeper_port: int = typer.Option(2181, "--zookeeper-port"),
    override: list[str] | None = typer.Option(None, "--override",
                                              help="property=value for every broker"),
    log_level: str = typer.Option("INFO", "--log-level"),
    secure: bool = typer.Option(
        False, "--secure", help="SASL_SSL only (SCRAM-SHA-512, a local CA), ACLs on, an "
        "admin user; prints the client.properties to use"),
) -> None:
    """Start N brokers on ZooKeeper and print the bootstrap servers; Ctrl-C stops all."""
    from odradek.cluster.local_zookeeper import ZooKeeperProcess, zookeeper_available

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    extra = parse_pairs(override, "override")
    zk: ZooKeeperProcess | None = None
    procs: dict[int, subprocess.Popen[bytes]] = {}
    ports = {i: base_port + i - 1 for i in range(1, brokers + 1)}
    try:
        if zookeeper is None:
            if not zookeeper_available():
                fail("no ZooKeeper: install Debian's `zookeeper` package (and Java), or pass "
                     "--zookeeper HOST:PORT")
            zk = ZooKeeperProcess(data_dir / "zookeeper", port=zookeeper_port)
            try:
                zk.start()
            except RuntimeError as e:
                fail(f"ZooKeeper did not start: {e}")
            zookeeper = zk.connect
            console.print(f"ZooKeeper on {zookeeper} (data in {data_dir / 'zookeeper'})")
        setup = None
        if secure:
            from odradek.cli import cluster_secure, scram_users

            try:
                setup = cluster_secure.prepare(data_dir, zookeeper)
            except scram_users.ScramError as e:
                fail(str(e))
            extra = {**setup.broker_properties, **extra}
        for node_id, port in ports.items():
            if _serving(port):
                fail(f"port {port} is in use: choose another --base-port")
            props = broker_properties(node_id, port, data_dir, zookeeper, brokers, extra)
            if secure:
                props["listeners"] = f"SASL_SSL://127.0.0.1:{port}"
            cmd = [sys.executable, "-m", "odradek", "broker", "--log-level", log_level]
            for k, v in props.items():
                cmd += ["--override", f"{k}={v}"]
            log = open(data_dir / f"broker-{node_id}.log", "ab")  # noqa: SIM115 - the child's
            procs[node_id] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + 60
        waiting = set(ports)
        while waiting:
            for node_id in list(waiting):
                if procs[node_id].poll() is not None:
                    fail(f"broker {node_id} exited with {procs[node_id].returncode}; see "
                         f"{data_dir / f'broker-{node_id}.log'}")
                if _serving(ports[node_id]):
                    waiting.discard(node_id)
            if time.monotonic() > deadline:
                fail(f"brokers {sorted(waiting)} did not start within 60 s")
            time.sleep(0.1)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        console.print(f"{brokers} brokers up on ZooKeeper {zookeeper}; logs in {data_dir}")
        print(f"bootstrap.servers={bootstrap}", flush=True)
        if setup is not None:
            console.print("SASL_SSL only, ACLs on; user admin (a super user). Tools: "
                          f"--command-config {setup.client_properties}")
            console.print("confluent-kafka / librdkafka settings:")
            for key, value in setup.librdkafka.items():
                print(f"  {key}={value}", flush=True)
            print(f"client.properties={setup.client_properties}", flush=True)
        console.print("Ctrl-C stops the cluster")
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        dead = [i for i, p in procs.items() if p.poll() is not None]
        console.print(f"broker(s) {dead} exited; stopping the others")
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        _stop_all(procs)
        if zk is not None:
            zk.stop()


def _stop_all(procs: dict[int, subprocess.Popen[bytes]]) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs.values():
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
