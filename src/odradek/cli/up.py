"""`odradek up`: broker + fleet + lake ingest + device stats on embedded defaults.

The broker runs as its own process (`odradek broker`), so the Spark driver in this one
never competes with it for the GIL; Ctrl-C stops the pipeline first, then the broker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import console, fail, home_of
from odradek.configdef import ConfigError
from odradek.home import Home
from odradek.server.config import BrokerConfig


def _wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the broker exited with code {proc.returncode}; see its log above")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    fail(f"the broker did not listen on {host}:{port} within {timeout:.0f}s")


CONSOLE_PORT = 8080
REGISTRY_PORT = 8081  # Confluent's


def _free_or_any(port: int) -> int:
    """`port` when nothing listens there, else one the kernel picks."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_registry(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the broker exited with code {proc.returncode}; see its log above")
        try:
            if httpx.get(f"{url}/subjects", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    fail(f"the broker's schema registry did not answer on {url} within {timeout:.0f}s")


def _start_console(bootstrap: str, home_dir: Path, out: Any = None) -> Any:
    """The web console beside the pipeline, on 8080 or, when that is taken, a free port."""
    from odradek.console.serve import BackgroundConsole, port_free
    from odradek.console.settings import ConsoleSettings

    port = CONSOLE_PORT
    if not port_free("127.0.0.1", port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    settings = ConsoleSettings(
        bootstrap, lake_catalog_uri=f"sqlite:///{Home(home_dir.absolute()).catalog_db}")
    web = BackgroundConsole(settings, "127.0.0.1", port).start()
    if out is None:
        console.print(f"odradek: console on [bold]{web.url}[/bold]")
    else:
        out.say(f"odradek: console on {web.url}", "console", url=web.url)
    return web


def run(*, rate: float, devices: int, duration: float | None, log_level: str,
        data_dir: Path | None = None, log_format: str = "auto",
        progress_interval: float = 10.0, maintain_every: int = 50,
        retention: float | None = None, snapshots_kept: int | None = None) -> None:
    from odradek.pipeline.reporting import Reporter

    out = Reporter(console, log_format)
    try:
        config = BrokerConfig.load()
    except ConfigError as e:
        fail(str(e))
    listener = config.advertised_listeners[0]
    bootstrap = f"{listener.host}:{listener.port}"
    explicit_dirs = {"log.dirs", "log.dir"} & config.explicit
    if data_dir is not None and explicit_dirs:
        fail(f"--data-dir and {sorted(explicit_dirs)[0]} (ODRADEK_LOG_DIRS) both say where "
             "the broker's data goes: give one of them")
    home = home_of(data_dir, writing=False)  # refused before anything is made
    with socket.socket() as probe:
        if probe.connect_ex((listener.host, listener.port)) == 0:
            fail(f"something already listens on {bootstrap}; stop it or set "
                 "ODRADEK_LISTENERS=PLAINTEXT://localhost:PORT to use another port")
    home = home_of(home.root, writing=True)
    broker_data = config.log_dirs[0] if explicit_dirs else home.broker_data
    registry_url = f"http://127.0.0.1:{_free_or_any(REGISTRY_PORT)}"
    out.say(f"odradek: broker on {bootstrap}, schema registry on {registry_url}; data home "
            f"{home.root} (broker data in {broker_data}, lake in {home.lake}, checkpoints in "
            f"{home.checkpoints})", "started", bootstrap=bootstrap, home=str(home.root),
            schema_registry=registry_url)
    old_lake = home.root / "pipeline" / "lake" / "catalog.db"
    if old_lake.is_file():
        out.say(f"odradek: an earlier odradek up left its lake in {old_lake.parent}; read it "
                f"with odradek lake tables --catalog-uri sqlite:///{old_lake}", "note")
    web: Any = None
    cmd = [sys.executable, "-m", "odradek", "broker", "--log-level", log_level,
           "--override", f"schema.registry.listeners={registry_url}"]
    if not explicit_dirs:
        cmd += ["--data-dir", str(home.root)]
    broker = subprocess.Popen(cmd, start_new_session=True)
    failure = ""
    try:
        _wait_for_port(listener.host, listener.port, broker, timeout=60)
        _wait_for_registry(registry_url, broker, timeout=60)
        from odradek.pipeline.up import UpOptions, run_up

        web = _start_console(bootstrap, home.root, out)
        run_up(bootstrap, home.root, rate=rate, devices=devices, duration_s=duration,
               console=console, options=UpOptions(
                   log_format=log_format, progress_interval_s=progress_interval,
                   maintain_every=maintain_every, retain_snapshots_s=retention,
                   snapshots_kept=snapshots_kept),
               registry_url=registry_url)
    except KeyboardInterrupt:
        pass
    except typer.Exit:
        raise
    except Exception as e:  # a query or the fleet died: its first line, then a clean stop
        failure = str(e).splitlines()[0] if str(e) else repr(e)
    finally:
        if web is not None:
            web.stop()
        if broker.poll() is None:
            os.killpg(broker.pid, signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(broker.pid, signal.SIGKILL)
    if failure:
        fail(f"the pipeline stopped: {failure}")
