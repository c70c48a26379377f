"""The connections dimension of the scale benchmark (issue 12).

One broker; a busy client's request latency (p50 and p99 of a one-record acks=1
Produce, on one connection, the broker's own codecs) is measured with no other
connection, then with N idle connections open beside it — each opened and greeted
with an ApiVersions, as a client does, then left alone. The goal: at 10,000 idle
connections the busy client's p99 within 20% of the baseline. The broker's RSS and
idle CPU with the connections open are reported too.

    python -m bench.scale --connections 1000,10000
"""

from __future__ import annotations

import contextlib
import datetime
import selectors
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.brokers import rss_kib
from bench.scale_groups import call, percentile, schema
from odradek.protocol.client_framing import ClientFraming
from odradek.protocol.records import NewRecord, encode_batch

PRODUCE, API_VERSIONS = 0, 18
TOPIC = "scale-connections"
REQUESTS = 2000


def busy_latencies(client: Any, requests: int) -> list[float]:
    ps = schema(PRODUCE, 9)
    records = encode_batch([NewRecord(value=b"x" * 100)])
    data = (ps.TopicProduceData(name=TOPIC, partition_data=(
        ps.PartitionProduceData(index=0, records=records),)),)
    out = []
    for _ in range(requests):
        started = time.perf_counter()
        resp = call(client, PRODUCE, 9, transactional_id=None, acks=1,
                    timeout=datetime.timedelta(seconds=30), topic_data=data)
        out.append((time.perf_counter() - started) * 1000)
        code = resp.responses[0].partition_responses[0].error_code
        if code:
            raise RuntimeError(f"produce failed: error {code}")
    return out


def open_idle(bootstrap: str, n: int, timeout: float = 300.0) -> list[socket.socket]:
    """`n` connections, each having had its ApiVersions answered."""
    host, port = bootstrap.rsplit(":", 1)
    framing = ClientFraming("scale-idle")
    _cid, hello = framing.build(API_VERSIONS, 3, client_software_name="scale-bench",
                                client_software_version="1")
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    for start in range(0, n, 500):  # in waves: the broker's accept backlog is finite
        wave = []
        for _ in range(min(500, n - start)):
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(hello)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            wave.append(s)
        waiting = set(wave)
        while waiting:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} connections got no ApiVersions answer")
            for key, _ in sel.select(1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if not sock.recv(65536):
                    raise RuntimeError("the broker closed an idle connection at once")
                sel.unregister(sock)
                waiting.discard(sock)
        socks += wave
    sel.close()
    return socks


def measure_connections(size: int, workdir: Path, say: Callable[[str], None]
                        ) -> dict[str, float]:
    from bench.scale_broker import RawClient, ScaleBroker, create_topics, idle_cpu_percent

    data_dir = Path(tempfile.mkdtemp(prefix=f"conns-{size}-", dir=workdir))
    broker = ScaleBroker(data_dir, workdir / f"broker-conns-{size}.log")
    out: dict[str, float] = {"size": size}
    idle: list[socket.socket] = []
    try:
        broker.start(0)
        create_topics(broker.bootstrap, [(TOPIC, 1)])
        client = RawClient(broker.bootstrap)
        busy_latencies(client, 200)  # warm
        alone = busy_latencies(client, REQUESTS)
        rss = rss_kib(broker.pid)
        idle = open_idle(broker.bootstrap, size)
        say(f"{size} idle connections open")
        crowded = busy_latencies(client, REQUESTS)
        out.update(alone_p50_ms=percentile(alone, 0.5), alone_p99_ms=percentile(alone, 0.99),
                   busy_p50_ms=percentile(crowded, 0.5), busy_p99_ms=percentile(crowded, 0.99),
                   conn_rss_mib=(rss_kib(broker.pid) - rss) / 1024,
                   conn_idle_cpu_pct=idle_cpu_percent(broker.pid, 5))
        out["p99_ratio"] = out["busy_p99_ms"] / max(out["alone_p99_ms"], 1e-6)
        client.close()
    finally:
        for s in idle:
            with contextlib.suppress(OSError):
                s.close()
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


CONNECTION_METRICS = (
    ("alone_p50_ms", "busy client alone, p50 (ms)", "{:.2f}", ""),
    ("alone_p99_ms", "busy client alone, p99 (ms)", "{:.2f}", ""),
    ("busy_p50_ms", "… beside the idle ones, p50 (ms)", "{:.2f}", ""),
    ("busy_p99_ms", "… beside the idle ones, p99 (ms)", "{:.2f}", ""),
    ("p99_ratio", "p99 ratio (crowded / alone)", "{:.2f}", "≤ 1.2 at 10,000"),
    ("conn_rss_mib", "RSS added by the idle ones (MiB)", "{:,.1f}", ""),
    ("conn_idle_cpu_pct", "idle CPU with them open (% core)", "{:.2f}", ""),
)
