"""What client quotas and connection limits cost per request and per connection.

- the throttle step's work for one produce request (QuotaStep.finish: request time
  and bytes recorded, precedence resolved), with 1, 1,000 and 10,000 configured
  entities and as many distinct clients;
- a CreateTopics of one topic under a controller_mutation_rate quota (the request's
  quota resolved in prepare, its partition charged, its throttle read in finish), with
  1, 1,000 and 10,000 configured entities;
- reloading the quotas after an AlterClientQuotas (QuotaConfigs.from_stored), at the
  same sizes;
- ConnectionLimits.admit + release with 1, 1,000 and 10,000 connections open.

Pure CPU, no broker: the numbers are per call on this machine (print the load average
beside them; compare within one run).

    python -m bench.quotas_bench [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from odradek.protocol.headers import RequestHeader
from odradek.server.connection_limits import ConnectionLimits
from odradek.server.handlers.base import RequestContext
from odradek.server.quota_step import Channel, QuotaStep

SIZES = (1, 1_000, 10_000)


class _Produce:
    acks = 1


def _stored(n: int) -> dict[str, dict[str, str]]:
    return {f"/config/clients/c{i}": {"producer_byte_rate": str(10**9)} for i in range(n)}


def bench_finish(n: int, calls: int = 50_000) -> float:
    step = QuotaStep(_stored(n))
    contexts = [RequestContext(ports=None, header=RequestHeader(0, 9, 1, f"c{i % n}"),  # type: ignore[arg-type]
                               client_host="127.0.0.1", client_port=1, listener="PLAINTEXT",
                               request_size=1024) for i in range(min(n, calls))]
    request, channel, result = _Produce(), Channel(), None
    started = time.perf_counter()
    for i in range(calls):
        step.finish(contexts[i % len(contexts)], request, result, 20_000, channel)
    return (time.perf_counter() - started) / calls * 1e6


def bench_mutation(n: int, calls: int = 50_000) -> float:
    stored = {f"/config/clients/c{i}": {"controller_mutation_rate": str(10**9)}
              for i in range(n)}
    step = QuotaStep(stored)
    headers = [RequestHeader(19, 7, 1, f"c{i % n}") for i in range(min(n, calls))]
    request, channel = object(), Channel()
    started = time.perf_counter()
    for i in range(calls):
        ctx = RequestContext(ports=None, header=headers[i % len(headers)],  # type: ignore[arg-type]
                             client_host="127.0.0.1", client_port=1, listener="PLAINTEXT")
        step.prepare(ctx, request)
        ctx.record_mutation(1)
        step.finish(ctx, request, None, 20_000, channel)
    return (time.perf_counter() - started) / calls * 1e6


def bench_reload(n: int) -> float:
    stored = _stored(n)
    step = QuotaStep(stored)
    started = time.perf_counter()
    step.reload(stored)
    return (time.perf_counter() - started) * 1e3


def bench_admit(n: int) -> float:
    limits = ConnectionLimits(max_connections=10**6, per_ip=10**6)
    for i in range(n):
        limits.admit("PLAINTEXT", f"10.0.{i // 256 % 256}.{i % 256}")
    calls = 50_000
    started = time.perf_counter()
    for _ in range(calls):
        limits.admit("PLAINTEXT", "10.9.9.9")
        limits.release("PLAINTEXT", "10.9.9.9")
    return (time.perf_counter() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} (best of {args.repeat})")
    rows: list[tuple[str, Any, Any, Any]] = [
        ("throttle step per produce (µs)",
         *(min(bench_finish(n) for _ in range(args.repeat)) for n in SIZES)),
        ("CreateTopics, mutation quota (µs)",
         *(min(bench_mutation(n) for _ in range(args.repeat)) for n in SIZES)),
        ("reload after AlterClientQuotas (ms)",
         *(min(bench_reload(n) for _ in range(args.repeat)) for n in SIZES)),
        ("connection admit + release (µs)",
         *(min(bench_admit(n) for _ in range(args.repeat)) for n in SIZES)),
    ]
    print(f"{'':38}{'1':>10}{'1,000':>10}{'10,000':>10}")
    for name, *values in rows:
        print(f"{name:38}" + "".join(f"{v:10.2f}" for v in values))


if __name__ == "__main__":
    main()
