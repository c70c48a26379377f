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

from odradek.cli.common import console, fail
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


def _start_console(bootstrap: str, pipeline_dir: Path) -> Any:
    """The web console beside the pipeline, on 8080 or, when that is taken, a free port."""
    from odradek.console.serve import BackgroundConsole, port_free
    from odradek.console.settings import ConsoleSettings

    port = CONSOLE_PORT
    if not port_free("127.0.0.1", port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    settings = ConsoleSettings(
        bootstrap, lake_catalog_uri=f"sqlite:///{(pipeline_dir / 'lake' / 'catalog.db').resolve()}")
    web = BackgroundConsole(settings, "127.0.0.1", port).start()
    console.print(f"odradek: console on [bold]{web.url}[/bold]")
    return web


def run(*, rate: float, devices: int, duration: float | None, log_level: str) -> None:
    config = BrokerConfig.load()
    listener = config.advertised_listeners[0]
    bootstrap = f"{listener.host}:{listener.port}"
    data_dir: Path = config.log_dirs[0]
    with socket.socket() as probe:
        if probe.connect_ex((listener.host, listener.port)) == 0:
            fail(f"something already listens on {bootstrap}; stop it or set "
                 "ODRADEK_LISTENERS to another port")
    console.print(f"odradek: broker on {bootstrap}, data in {data_dir}")
    web: Any = None
    broker = subprocess.Popen([sys.executable, "-m", "odradek", "broker",
                               "--log-level", log_level], start_new_session=True)
    try:
        _wait_for_port(listener.host, listener.port, broker, timeout=60)
        from odradek.pipeline.up import run_up

        pipeline_dir = data_dir.parent / "pipeline"
        web = _start_console(bootstrap, pipeline_dir)
        run_up(bootstrap, pipeline_dir, rate=rate, devices=devices, duration_s=duration,
               console=console)
    except KeyboardInterrupt:
        pass
    finally:
        if web is not None:
            web.stop()
        if broker.poll() is None:
            os.killpg(broker.pid, signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(broker.pid, signal.SIGKILL)
