"""What TLS and SASL cost: `python bench/security.py [--quick] [--rounds N] [--peer]`.

One odradek broker with three listeners — PLAINTEXT, SSL (a client certificate) and
SASL_SSL (SCRAM-SHA-512) — and librdkafka's C perf tool producing and consuming 1 KB
records through each in turn, the order rotating every round. Printed: median MB/s,
the ratio to odradek's own PLAINTEXT figure (issue 11's goal: ≥ 70%), the broker's CPU
seconds per MB, and with --peer the peer's PLAINTEXT figure in the same run (goal: each
secured row ≥ it). Certificates and the SCRAM user are made for the run.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import sys
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from types import FrameType

if __package__ in (None, ""):  # run as a script: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import tools
from bench.brokers import Broker, free_port, stop_all, tansu_broker
from bench.clients import CClient
from bench.workloads import create_topic

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def _secured_broker(workdir: Path) -> tuple[Broker, dict[str, int], dict[str, dict[str, str]]]:
    """The broker and, per listener, its port and the C client's properties."""
    from odradek.security.certs import write_bundle

    bundle = write_bundle(workdir / "tls", users=["bench"])
    ports = {"SSL": free_port(), "SASL_SSL": free_port()}
    keystore = bundle.broker_properties("localhost")

    def command(port: int, data_dir: Path) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ports['SSL']},"
                         f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
            "log.dirs": str(data_dir), "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            **{f"listener.name.ssl.{k}": v for k, v in keystore.items()},
            **{f"listener.name.sasl_ssl.{k}": v for k, v in keystore.items()
               if k != "ssl.client.auth"},
        }
        cmd = [sys.executable, "-m", "odradek", "broker", "--log-level", "WARNING"]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    clients = {
        "PLAINTEXT": {},
        "SSL": bundle.client_properties("bench"),
        "SASL_SSL": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": USER, "sasl.password": PASSWORD,
                     "ssl.ca.location": str(bundle.ca_path)},
    }
    return Broker("odradek", command, workdir), ports, clients


def _add_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the futures end
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


@dataclass(frozen=True)
class Row:
    produce_mbs: float
    consume_mbs: float
    produce_cpu: float  # broker CPU seconds per MB produced
    consume_cpu: float  # broker CPU seconds per MB consumed
    client_cpu: float  # the consumer's own CPU seconds per MB
    faults: float  # broker minor page faults per MB, both ways


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # the client runs are reaped
    return used.ru_utime + used.ru_stime


def _measure(broker: Broker, client: CClient, address: str, props: dict[str, str],
             topic: str, records: int) -> Row:
    create_topic(broker.bootstrap, topic, 1)
    cpu, faults = broker.cpu(), broker.faults()
    produced = client.produce(address, topic, records, 1024, "1", 600, extra=dict(props))
    mid, mine = broker.cpu(), _children_cpu()
    consumed = client.consume(address, topic, 1, records, 600, extra=dict(props))
    client_cpu = _children_cpu() - mine
    p_mb, c_mb = produced.bytes / 1e6, consumed.bytes / 1e6
    return Row(p_mb / produced.seconds, c_mb / consumed.seconds, (mid - cpu) / p_mb,
               (broker.cpu() - mid) / c_mb, client_cpu / c_mb,
               (broker.faults() - faults) / (p_mb + c_mb))


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="20k records, one round")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (quick: 1)")
    ap.add_argument("--records", type=int, default=None, help="1 KB records per workload")
    ap.add_argument("--peer", action="store_true", help="the peer's PLAINTEXT row too")
    args = ap.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    records = args.records or (20_000 if args.quick else 500_000)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    client = CClient(tools.ensure_rdkafka_performance())
    tools.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="security-", dir=tools.CACHE_DIR))
    rows: dict[str, list[Row]] = {}
    try:
        broker, ports, props = _secured_broker(workdir)
        broker.start()
        _add_user(broker.bootstrap)
        for rnd in range(rounds):
            for i in range(len(LISTENERS)):
                listener = LISTENERS[(i + rnd) % len(LISTENERS)]
                address = (broker.bootstrap if listener == "PLAINTEXT"
                           else f"localhost:{ports[listener]}")
                got = _measure(broker, client, address, props[listener],
                               f"sec-{listener.lower()}-{rnd}", records)
                rows.setdefault(listener, []).append(got)
                print(f"  r{rnd + 1} {listener:9} produce {got.produce_mbs:7.1f} MB/s  "
                      f"consume {got.consume_mbs:7.1f} MB/s  broker "
                      f"{got.produce_cpu * 1000:5.2f} / {got.consume_cpu * 1000:5.2f} ms "
                      f"CPU/MB, consumer {got.client_cpu * 1000:5.2f}  "
                      f"{got.faults:5.0f} faults/MB", file=sys.stderr)
        broker.stop()
        if args.peer:
            peer = tansu_broker("peer", tools.ensure_tansu(), "memory://tansu/", workdir)
            for rnd in range(rounds):
                peer.start()
                got = _measure(peer, client, peer.bootstrap, {}, f"sec-peer-{rnd}", records)
                rows.setdefault("peer PLAINTEXT", []).append(got)
                peer.stop()
    except KeyboardInterrupt:
        print("! interrupted", file=sys.stderr)
    finally:
        stop_all()
    _print(rows, rounds, records)
    return 0


def _print(rows: dict[str, list[Row]], rounds: int, records: int) -> None:
    med = {k: Row(*(statistics.median(getattr(r, f.name) for r in v) for f in fields(Row)))
           for k, v in rows.items()}
    base = med.get("PLAINTEXT")
    peer = med.get("peer PLAINTEXT")
    print(f"\nmedians of {rounds} round(s), {records:,} records of 1 KB, load "
          f"{os.getloadavg()[0]:.1f}; command: python bench/security.py"
          f"{' --peer' if peer else ''}")
    print("| listener | produce MB/s | consume MB/s | of PLAINTEXT (p / c) | "
          "≥ peer PLAINTEXT (p / c) | broker CPU ms/MB (p / c) | consumer CPU ms/MB | "
          "broker page faults / MB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in med.items():
        ratio = (f"{r.produce_mbs / base.produce_mbs:.0%} / {r.consume_mbs / base.consume_mbs:.0%}"
                 if base else "-")
        versus = (f"{'yes' if r.produce_mbs >= peer.produce_mbs else 'no'} / "
                  f"{'yes' if r.consume_mbs >= peer.consume_mbs else 'no'}"
                  if peer and name != "peer PLAINTEXT" else "-")
        print(f"| {name} | {r.produce_mbs:,.1f} | {r.consume_mbs:,.1f} | {ratio} | {versus} | "
              f"{r.produce_cpu * 1000:.2f} / {r.consume_cpu * 1000:.2f} | "
              f"{r.client_cpu * 1000:.2f} | {r.faults:,.0f} |")


if __name__ == "__main__":
    sys.exit(main())
