"""A real PostgreSQL for tests (Debian's `postgresql` package, installed by
scripts/install-system-deps): one throw-away server on a free loopback port.

PostgreSQL refuses to run as root, so under root (CI) the server runs as the package's
`postgres` user through runuser; its data lives in a directory that user can reach.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.processes import started


def _binary(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        pytest.fail("PostgreSQL is not installed: run scripts/install-system-deps")
    return found[-1]


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def postgres_server(user: str = "odradek") -> Iterator[str]:
    """A running server; yields its SQLAlchemy URL (psycopg 3) for database `lake`."""
    base = Path(tempfile.mkdtemp(prefix="odradek-pg-", dir="/tmp"))
    base.chmod(0o755)
    data = base / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
        shutil.chown(base, "postgres", "postgres")
    port = free_port()
    try:
        subprocess.run(_as_server_user([_binary("initdb"), "-D", str(data), "-U", user,
                                        "-A", "trust", "--no-sync"]),
                       check=True, capture_output=True, timeout=120)
        server = _as_server_user([
            _binary("postgres"), "-D", str(data), "-p", str(port), "-k", str(base),
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
            "-c", "max_connections=50"])
        with started(server, base / "server.log") as proc:
            url = f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres"
            _wait_ready(url, proc, base / "server.log")
            import psycopg

            with psycopg.connect(f"host=127.0.0.1 port={port} user={user} dbname=postgres",
                                 autocommit=True) as conn:
                conn.execute("CREATE DATABASE lake")
            yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/lake"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path,
                timeout: float = 60.0) -> None:
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"PostgreSQL did not start:\n"
                                     f"{log.read_text(errors='replace')[-2000:]}") from None
            time.sleep(0.1)
