"""Avro record values (plain, or in Confluent's wire format) turned into JSON text.

The lake's inference and schema merging work on JSON; an Avro value is decoded with the
writer schema the user gives (an .avsc file) and rendered as JSON, so both formats share
one path. Confluent's framing (a zero byte and a 4-byte schema id before the Avro body) is
stripped when the job says the topic uses it; the id is not looked up (no schema registry
here), the given schema is used for every id. Needs `fastavro`.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import uuid
from pathlib import Path
from typing import Any, Protocol

CONFLUENT_MAGIC = 0


class ValueDecoder(Protocol):
    """What the lake writer asks of a value decoder: JSON text, or why there is none.
    AvroDecoder (one given schema) and registry_values.FramedDecoder (by schema id)."""

    def decode(self, value: bytes | None) -> tuple[str | None, str | None]: ...


def load_schema(path: Path) -> dict[str, Any]:
    """Read and check an .avsc file; a bad schema fails the job before it starts."""
    from fastavro import parse_schema

    raw = json.loads(path.read_text())
    parse_schema(raw)
    return dict(raw) if isinstance(raw, dict) else {"type": raw}


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


class AvroDecoder:
    """Decodes values into (json text, None) or (None, why not). Picklable for tasks."""

    def __init__(self, schema: dict[str, Any], confluent: bool = True) -> None:
        self.schema = schema
        self.confluent = confluent
        self._parsed: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "confluent": self.confluent, "_parsed": None}

    def decode(self, value: bytes | None) -> tuple[str | None, str | None]:
        from fastavro import schemaless_reader

        if value is None:
            return None, None
        if self._parsed is None:
            from fastavro import parse_schema

            self._parsed = parse_schema(self.schema)
        body = value
        if self.confluent:
            if len(value) < 5 or value[0] != CONFLUENT_MAGIC:
                return None, "not in Confluent's wire format (no magic byte and schema id)"
            body = value[5:]
        try:
            stream = io.BytesIO(body)
            record = schemaless_reader(stream, self._parsed, None)
            if stream.tell() != len(body):
                return None, (f"not an Avro record of this schema: {len(body) - stream.tell()} "
                              "bytes left over")
            return json.dumps(record, default=_jsonable, separators=(",", ":")), None
        except Exception as e:  # fastavro raises many kinds for corrupt input
            return None, f"not an Avro record of this schema: {type(e).__name__}: {e}"
