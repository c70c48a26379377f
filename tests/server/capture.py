"""A recording TCP proxy: real clients talk to a broker through it, and it keeps every
request frame they send (size prefix included), as seeds for the fuzz tests.

The broker must advertise the proxy's address (`advertised.listeners`), or clients
leave the proxy after their first Metadata.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class RecordingProxy:
    def __init__(self, upstream: tuple[str, int], port: int) -> None:
        self.upstream = upstream
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="capture-accept").start()

    @property
    def address(self) -> str:
        host, port = self._server.getsockname()[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self._closed = True
        for s in [self._server, *self._sockets]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # wakes the threads blocked on it
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
                broker = socket.create_connection(self.upstream)
            except OSError:
                return
            self._sockets += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        pending = bytearray()
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
                pending += chunk
                while len(pending) >= 4:
                    size = int.from_bytes(pending[:4], "big", signed=True)
                    if size < 0 or len(pending) < 4 + size:
                        break
                    with self._lock:
                        self.frames.append(bytes(pending[:4 + size]))
                    del pending[:4 + size]
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
