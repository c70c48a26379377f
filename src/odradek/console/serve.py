"""Run the console: in the foreground (`odradek console`) or in a thread beside other
work (`odradek up`)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from odradek.console.app import create_app
from odradek.console.settings import ConsoleSettings


def build_server(settings: ConsoleSettings, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning",
                            access_log=False, lifespan="on")
    return uvicorn.Server(config)


class BackgroundConsole:
    """The console in a daemon thread; `stop()` ends it cleanly."""

    def __init__(self, settings: ConsoleSettings, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.server = build_server(settings, host, port)
        self.thread = threading.Thread(target=self.server.run, name="console", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def start(self, timeout: float = 30.0) -> BackgroundConsole:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise OSError(f"the console could not listen on {self.host}:{self.port}")
            if time.monotonic() > deadline:
                raise OSError(f"the console did not start within {timeout:.0f}s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((host, port)) != 0
