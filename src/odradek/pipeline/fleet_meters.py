"""The fleet's energy meters: readings in Avro, registered in a schema registry and sent in
Confluent's wire format (confluent-kafka's AvroSerializer, as a Python team sends them).

The schema shows what the lake maps from a registered schema: a nested record, an enum,
an array, a nullable field and a timestamp-millis. The firmware update adds an optional
field (`power_factor`), a BACKWARD-compatible second version of `fleet.meter-value`.
"""

from __future__ import annotations

import json
import random
from typing import Any

METER_TOPIC = "fleet.meter"
METER_TABLE = "iot.meters"

_FIELDS: list[dict[str, Any]] = [
    {"name": "meter_id", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "reading", "type": {"type": "record", "name": "Reading", "fields": [
        {"name": "kwh", "type": "double"}, {"name": "volts", "type": "float"}]}},
    {"name": "phase", "type": {"type": "enum", "name": "Phase", "symbols": ["L1", "L2", "L3"]}},
    {"name": "tariff", "type": ["null", "string"], "default": None},
    {"name": "alarms", "type": {"type": "array", "items": "string"}},
]
METER_V1: dict[str, Any] = {"type": "record", "name": "MeterReading",
                            "namespace": "odradek.fleet", "fields": _FIELDS}
METER_V2: dict[str, Any] = {**METER_V1, "fields": [
    *_FIELDS, {"name": "power_factor", "type": ["null", "double"], "default": None}]}


class MeterFleet:
    """Readings of a few meters, serialized against the registry at `registry_url`."""

    def __init__(self, registry_url: str, seed: int = 7, meters: int = 8) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer

        self.rng = random.Random(seed)
        self.client = SchemaRegistryClient({"url": registry_url})
        self.v1 = AvroSerializer(self.client, json.dumps(METER_V1))
        self.v2 = AvroSerializer(self.client, json.dumps(METER_V2))
        self.meters = [f"meter-{i:02d}" for i in range(meters)]
        self.kwh = dict.fromkeys(self.meters, 0.0)

    def reading(self, ts_ms: int, updated: bool) -> dict[str, Any]:
        rng = self.rng
        meter = rng.choice(self.meters)
        self.kwh[meter] += rng.random() / 10
        record: dict[str, Any] = {
            "meter_id": meter, "ts": ts_ms,
            "reading": {"kwh": round(self.kwh[meter], 4), "volts": 225 + rng.random() * 10},
            "phase": rng.choice(("L1", "L2", "L3")),
            "tariff": None if rng.random() < 0.2 else rng.choice(("peak", "off-peak")),
            "alarms": ["overvoltage"] if rng.random() < 0.05 else []}
        if updated:
            record["power_factor"] = round(0.8 + rng.random() / 5, 3)
        return record

    def next(self, ts_ms: int, updated: bool) -> tuple[str, bytes, bytes]:
        """(topic, key, Confluent-framed Avro value) of the next reading."""
        from confluent_kafka.serialization import MessageField, SerializationContext

        record = self.reading(ts_ms, updated)
        serialize = self.v2 if updated else self.v1
        value = serialize(record, SerializationContext(METER_TOPIC, MessageField.VALUE))
        assert value is not None
        return METER_TOPIC, str(record["meter_id"]).encode(), value
