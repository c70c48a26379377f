"""Schema registry throughput: `python bench/registry_bench.py [--schemas N] [--lookups N]`.

Starts an odradek broker and `odradek schema-registry` on loopback, then measures from
one HTTP client (keep-alive, as confluent-kafka's SchemaRegistryClient):
- registrations/s: new Avro schemas, each in its own subject (a write: compatibility
  check, `_schemas` append with acks=all, read back before the answer);
- the same registrations sent to a second instance, which forwards them to the leader;
- lookups/s: GET /schemas/ids/{id} (what a deserializer does on a cache miss) and
  POST /subjects/{subject} (what a serializer does to find a schema's version).
`--threads` sends from several clients at once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import odradek_broker

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_registry(bootstrap: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(workdir / f"registry-{port}.log", "ab")  # noqa: SIM115 - child owns it
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "-b",
                             bootstrap, "--listeners", url, "--log-level", "WARNING"],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.put(f"{url}/config", json={"compatibility": "BACKWARD"},
                         timeout=30).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the registry at {url} did not start")


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"Event{n}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "payload", "type": "string"},
                                  {"name": "tags", "type": {"type": "array",
                                                            "items": "string"}}]})


def rate(label: str, count: int, threads: int, one: object) -> float:
    call = one if callable(one) else None
    assert call is not None
    with httpx.Client(timeout=30) as warm:
        del warm
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(count)))
    seconds = time.perf_counter() - start
    per_s = count / seconds
    print(f"{label:<42} {per_s:9.0f} /s   ({count} in {seconds:.2f} s, {threads} clients)")
    return per_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=500)
    ap.add_argument("--lookups", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    broker = odradek_broker(workdir, {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        leader, url = start_registry(broker.bootstrap, workdir)
        procs.append(leader)
        follower, second = start_registry(broker.bootstrap, workdir)
        procs.append(follower)
        local = __import__("threading").local()

        def client() -> httpx.Client:
            if not hasattr(local, "c"):
                local.c = httpx.Client(timeout=30, headers=CT)
            return local.c  # type: ignore[no-any-return]

        ids: list[int] = []
        leader_url = url if url < second else second  # the lowest URL leads
        follower_url = second if leader_url == url else url

        def register(n: int, target: str = leader_url, base: int = 0) -> None:
            r = client().post(f"{target}/subjects/bench-{base + n}/versions",
                              content=json.dumps({"schema": schema(base + n)}))
            r.raise_for_status()
            ids.append(r.json()["id"])

        n, t = args.schemas, args.threads
        rate("registrations (leader)", n, t, register)
        rate("registrations (forwarded by a follower)", n, t,
             lambda i: register(i, follower_url, base=n))
        rng = random.Random(1)

        def by_id(_: int) -> None:
            client().get(f"{follower_url}/schemas/ids/{rng.choice(ids)}").raise_for_status()

        def lookup(_: int) -> None:
            i = rng.randrange(n)
            client().post(f"{url}/subjects/bench-{i}",
                          content=json.dumps({"schema": schema(i)})).raise_for_status()

        rate("lookups GET /schemas/ids/{id}", args.lookups, t, by_id)
        rate("lookups POST /subjects/{subject}", args.lookups, t, lookup)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        broker.stop()


if __name__ == "__main__":
    main()
