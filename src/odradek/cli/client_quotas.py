"""Client quotas from the command line: AlterClientQuotas and DescribeClientQuotas,
for `odradek configs` and `odradek kafka-configs` (--entity-type users|clients).

confluent-kafka has no binding for these APIs, so they go over one raw PLAINTEXT
connection (odradek.client.raw) to the first bootstrap server. Output and messages are
ConfigCommand's (`Quota configs for user-principal 'alice' are producer_byte_rate=1024.0`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.client import raw

DESCRIBE, ALTER = 48, 49
VERSION = 1
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
_ERRORS = {31: "CLUSTER_AUTHORIZATION_FAILED", 35: "UNSUPPORTED_VERSION",
           42: "INVALID_REQUEST", 40: "INVALID_CONFIG"}


class QuotaError(Exception):
    """A refusal by the broker, in one line."""


def _address(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        raise QuotaError(f"invalid bootstrap server {first}: expected host:port")
    return host.strip("[]"), int(port)


def _call(bootstrap: str, api_key: int, body: Any) -> Any:
    try:
        return raw.call(_address(bootstrap), api_key, VERSION, body, "odradek-configs")
    except OSError as e:
        raise QuotaError(f"cannot reach {bootstrap}: {e}") from None


def entity_of(types: Sequence[str], names: Sequence[str]) -> dict[str, str | None]:
    """ConfigCommand's entity: kafka-configs' types and names ('' for a default)."""
    return {ENTITY_TYPES[t]: (n or None) for t, n in zip(types, names, strict=False)}


def parse_values(adds: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, text in adds.items():
        try:
            out[key] = float(text)
        except ValueError:
            raise QuotaError(f"Cannot parse quota configuration value for {key}: "
                             f"{text}") from None
    return out


def describe(bootstrap: str, types: Sequence[str], names: Sequence[str | None]
             ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """The quotas of the entities matching exactly these types (a name None: any)."""
    from odradek.protocol.messages import request_class

    cls = request_class(DESCRIBE, VERSION)
    module = importlib.import_module(cls.__module__)
    components = []
    for t, n in zip(types, list(names) + [None] * (len(types) - len(names)), strict=True):
        if n is None:
            components.append(module.ComponentData(entity_type=ENTITY_TYPES[t], match_type=2,
                                                   match=None))
        elif n == "":
            components.append(module.ComponentData(entity_type=ENTITY_TYPES[t], match_type=1,
                                                   match=None))
        else:
            components.append(module.ComponentData(entity_type=ENTITY_TYPES[t], match_type=0,
                                                   match=n))
    response = _call(bootstrap, DESCRIBE, cls(components=tuple(components), strict=True))
    if response.error_code:
        raise QuotaError(f"{_ERRORS.get(int(response.error_code), response.error_code)}: "
                         f"{response.error_message}")
    return [({e.entity_type: e.entity_name for e in entry.entity},
             {v.key: float(v.value) for v in entry.values}) for entry in response.entries]


def alter(bootstrap: str, entity: Mapping[str, str | None], sets: Mapping[str, float],
          removes: Sequence[str]) -> None:
    from odradek.protocol.messages import request_class

    cls = request_class(ALTER, VERSION)
    module = importlib.import_module(cls.__module__)
    ops = [module.OpData(key=k, value=v, remove=False) for k, v in sets.items()]
    ops += [module.OpData(key=k, value=0.0, remove=True) for k in removes]
    entry = module.EntryData(
        entity=tuple(module.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
        ops=tuple(ops))
    response = _call(bootstrap, ALTER, cls(entries=(entry,), validate_only=False))
    result = response.entries[0]
    if result.error_code:
        raise QuotaError(f"{_ERRORS.get(int(result.error_code), result.error_code)}: "
                         f"{result.error_message}")


def _number(value: float) -> str:
    return repr(float(value))  # Java prints a Double as 1024.0


def describe_line(entity: Mapping[str, str | None], values: Mapping[str, float]) -> str:
    parts = []
    for etype in ("user", "client-id", "ip"):
        if etype in entity:
            name = entity[etype]
            label = _LABELS[etype]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    entries = ", ".join(f"{k}={_number(v)}" for k, v in sorted(values.items()))
    return f"Quota configs for {', '.join(parts)} are {entries}"
