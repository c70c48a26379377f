"""A simulated device fleet: cameras, door locks and climate sensors sending JSON telemetry.

Each device's records are keyed by its id (so one device stays on one partition, in
order) and stamped with the event time. Partway through, a firmware update rolls out: it
adds a field (`signal_dbm`) and changes a type (`temperature` goes from integer tenths of a
degree to a float in degrees), which is what the lake's schema evolution is for. A small
share of records is malformed, as real fleets send.

`FleetSimulator` is pure and deterministic for a seed; `run_fleet` sends its records.
Given a schema registry, the fleet's energy meters also report, to `fleet.meter`, as
Confluent-framed Avro (pipeline/fleet_meters.py): their schema gains a field with the
firmware update, a compatible new version in the registry.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

TOPICS = {"camera": "fleet.camera", "door_lock": "fleet.door", "climate": "fleet.climate"}
TOPIC_PATTERN = r"fleet\.(camera|door|climate)"
PREFIX = {"camera": "cam", "door_lock": "door", "climate": "th"}
DOOR_EVENTS = ("open", "close", "lock", "unlock")
METER_EVERY = 5  # one meter reading per this many fleet records


@dataclass(frozen=True)
class FleetConfig:
    devices: int = 30
    rate: float = 200.0  # records per second, whole fleet
    # The firmware update reaches each device after this many fleet records (None: never).
    firmware_update_after: int | None = 2_000
    malformed_share: float = 0.005
    seed: int = 7
    start_ms: int | None = None  # event time of the first record; None: now
    step_ms: int | None = None  # event-time step per record; None: follow the wall clock


@dataclass(frozen=True)
class FleetRecord:
    topic: str
    key: bytes
    value: bytes
    timestamp_ms: int
    malformed: bool
    firmware: str


class FleetSimulator:
    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        kinds = list(TOPICS)
        self.devices = [(f"{PREFIX[kind]}-{i:03d}", kind)
                        for i in range(config.devices) for kind in [kinds[i % len(kinds)]]]
        self.sent = 0
        self._door_state = {d: "close" for d, k in self.devices if k == "door_lock"}
        self._temp = {d: 180 + self.rng.randrange(60) for d, k in self.devices if k == "climate"}

    def updated(self) -> bool:
        after = self.config.firmware_update_after
        return after is not None and self.sent >= after

    def _payload(self, device: str, kind: str, ts_ms: int) -> dict[str, object]:
        rng = self.rng
        v2 = self.updated()
        body: dict[str, object] = {
            "device_id": device, "type": kind,
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms / 1000))
            + f".{ts_ms % 1000:03d}Z",
            "firmware": "2.0.0" if v2 else "1.4.2",
            "battery": rng.randrange(20, 101),
        }
        if kind == "camera":
            body["motion"] = rng.random() < 0.3
            body["confidence"] = rng.randrange(40, 100)
        elif kind == "door_lock":
            event = rng.choice(DOOR_EVENTS)
            self._door_state[device] = event
            body["event"] = event
        else:
            self._temp[device] += rng.randrange(-3, 4)
            tenths = self._temp[device]
            body["temperature"] = round(tenths / 10, 1) if v2 else tenths
            body["humidity"] = rng.randrange(25, 70)
        if v2:
            body["signal_dbm"] = -rng.randrange(40, 95)
        return body

    def next(self, now_ms: int | None = None) -> FleetRecord:
        cfg = self.config
        if cfg.start_ms is not None and cfg.step_ms is not None:
            ts_ms = cfg.start_ms + self.sent * cfg.step_ms
        else:
            ts_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        device, kind = self.devices[self.rng.randrange(len(self.devices))]
        body = self._payload(device, kind, ts_ms)
        value = json.dumps(body, separators=(",", ":")).encode()
        malformed = self.rng.random() < cfg.malformed_share
        if malformed:
            # A record cut short in transit, or a device sending garbage.
            value = value[: self.rng.randrange(5, len(value) - 1)] if self.rng.random() < 0.7 \
                else b"\xff\xfe" + value[:8]
        self.sent += 1
        return FleetRecord(TOPICS[kind], device.encode(), value, ts_ms, malformed,
                           str(body["firmware"]))

    def records(self, count: int) -> Iterator[FleetRecord]:
        for _ in range(count):
            yield self.next()


def ensure_topics(bootstrap: str, partitions: int = 2, topics: list[str] | None = None,
                  config: dict[str, str] | None = None) -> None:
    """Create the topics if they are missing (an existing topic is left as it is)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = topics or list(TOPICS.values())
    existing = set(admin.list_topics(timeout=30).topics)
    new = [NewTopic(t, partitions, 1, config=config or {}) for t in wanted if t not in existing]
    if not new:
        return
    for topic, future in admin.create_topics(new, request_timeout=30).items():
        try:
            future.result()
        except KafkaException as e:
            if "already exists" not in str(e).lower() and "TOPIC_ALREADY_EXISTS" not in str(e):
                raise RuntimeError(f"cannot create topic {topic}: {e}") from None


@dataclass
class FleetStats:
    sent: int = 0
    malformed: int = 0
    updated: bool = False
    errors: int = 0
    meter_readings: int = 0  # Avro, with a schema registry


def run_fleet(bootstrap: str, config: FleetConfig, stop: threading.Event,
              total: int | None = None, stats: FleetStats | None = None,
              on_progress: Callable[[FleetStats], None] | None = None,
              registry_url: str | None = None) -> FleetStats:
    """Send the fleet's records at `config.rate` until `stop` is set or `total` are sent;
    with `registry_url`, the meters' Avro readings too (one per METER_EVERY records)."""
    stats = stats or FleetStats()
    ensure_topics(bootstrap)
    sim = FleetSimulator(config)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20, "compression.type": "lz4"})
    meters = None
    if registry_url is not None:
        from odradek.pipeline.fleet_meters import METER_TOPIC, MeterFleet

        ensure_topics(bootstrap, topics=[METER_TOPIC])
        meters = MeterFleet(registry_url, config.seed)

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            stats.errors += 1

    started = time.monotonic()
    try:
        while not stop.is_set() and (total is None or stats.sent < total):
            # Pace by the clock, in small bursts, so a slow poll does not lower the rate.
            if config.rate > 0:
                due = int((time.monotonic() - started) * config.rate) + 1
                burst = min(due - stats.sent, 1_000)
            else:
                burst = 1_000  # as fast as the producer takes them
            if total is not None:
                burst = min(burst, total - stats.sent)
            if burst <= 0:
                stop.wait(min(0.05, 1.0 / max(config.rate, 1.0)))
                continue
            for _ in range(burst):
                rec = sim.next()
                while True:
                    try:
                        producer.produce(rec.topic, rec.value, key=rec.key,
                                         timestamp=rec.timestamp_ms, on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.05)
                stats.sent += 1
                stats.malformed += rec.malformed
                if meters is not None and stats.sent % METER_EVERY == 0:
                    topic, key, value = meters.next(rec.timestamp_ms, sim.updated())
                    producer.produce(topic, value, key=key, timestamp=rec.timestamp_ms,
                                     on_delivery=delivered)
                    stats.meter_readings += 1
            stats.updated = sim.updated()
            producer.poll(0)
            if on_progress is not None:
                on_progress(stats)
    finally:
        producer.flush(30)
    return stats
