"""Typed configuration definitions by Kafka's property names.

One `ConfigDef` per property: its type, default, validation and, where ours differs,
Kafka's own default and why. Broker configs (server/config.py) and topic configs
(storage/log_config.py) are both tables of these. A leaf module: it imports nothing
from odradek, so every layer may use it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigType(enum.Enum):
    BOOLEAN = "BOOLEAN"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    LIST = "LIST"
    PASSWORD = "PASSWORD"
    CLASS = "CLASS"

    @property
    def describe_type(self) -> int:
        """The config_type code DescribeConfigs v3+ reports."""
        return {
            ConfigType.BOOLEAN: 1,
            ConfigType.STRING: 2,
            ConfigType.INT: 3,
            ConfigType.LONG: 5,
            ConfigType.DOUBLE: 6,
            ConfigType.LIST: 7,
            ConfigType.CLASS: 8,
            ConfigType.PASSWORD: 9,
        }[self]


class ConfigError(ValueError):
    """A config value that cannot be used: names the property and says why."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    kafka_default: Any = None  # set only where our default differs from Kafka's
    why_different: str = ""
    sensitive: bool = False
    read_only: bool = False  # cannot be changed without a restart
    validator: Callable[[Any], str | None] | None = field(default=None, compare=False)

    def parse(self, raw: Any) -> Any:
        """Turn a string (or an already typed value) into this property's type, validated."""
        value = _convert(self, raw)
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        if value is None:
            return
        if self.type in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(
                    f"Invalid value {value} for configuration {self.name}: "
                    f"Value must be at least {_num(self.minimum)}"
                )
            if self.maximum is not None and value > self.maximum:
                raise ConfigError(
                    f"Invalid value {value} for configuration {self.name}: "
                    f"Value must be no more than {_num(self.maximum)}"
                )
        if self.choices is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    raise ConfigError(
                        f"Invalid value {item} for configuration {self.name}: "
                        f"String must be one of: {', '.join(self.choices)}"
                    )
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(f"Invalid value {value} for configuration {self.name}: {problem}")

    def render(self, value: Any) -> str | None:
        """The value as Kafka's tools print it."""
        if value is None:
            return None
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(str(v) for v in value)
        if self.type is ConfigType.PASSWORD:
            return None
        return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _convert(d: ConfigDef, raw: Any) -> Any:
    if raw is None:
        return None
    if d.type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError(
            f"Invalid value {raw} for configuration {d.name}: "
            "Expected value to be either true or false"
        )
    if d.type in (ConfigType.INT, ConfigType.LONG):
        if isinstance(raw, bool):
            raise ConfigError(f"Invalid value {raw} for configuration {d.name}: Not a number")
        if isinstance(raw, int):
            value = raw
        else:
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigError(
                    f"Invalid value {raw} for configuration {d.name}: Not a number of type "
                    f"{d.type.value}"
                ) from None
        limit = INT_MAX if d.type is ConfigType.INT else LONG_MAX
        if not -limit - 1 <= value <= limit:
            raise ConfigError(f"Invalid value {raw} for configuration {d.name}: out of range")
        return value
    if d.type is ConfigType.DOUBLE:
        try:
            return float(str(raw).strip())
        except ValueError:
            raise ConfigError(
                f"Invalid value {raw} for configuration {d.name}: Not a number of type DOUBLE"
            ) from None
    if d.type is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(v).strip() for v in raw]
        text = str(raw).strip()
        return [part.strip() for part in text.split(",") if part.strip()] if text else []
    return str(raw).strip() if d.type is not ConfigType.PASSWORD else str(raw)


class ConfigTable:
    """A set of definitions with lookup by name."""

    def __init__(self, defs: Iterable[ConfigDef]) -> None:
        self.defs: dict[str, ConfigDef] = {}
        for d in defs:
            if d.name in self.defs:
                raise ValueError(f"config {d.name} defined twice")
            self.defs[d.name] = d

    def __contains__(self, name: object) -> bool:
        return name in self.defs

    def __getitem__(self, name: str) -> ConfigDef:
        return self.defs[name]

    def __iter__(self) -> Any:
        return iter(self.defs.values())

    def parse_all(self, raw: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
        """Parse the known names in `raw`; unknown names raise when strict."""
        out: dict[str, Any] = {}
        for name, value in raw.items():
            if name not in self.defs:
                if strict:
                    raise ConfigError(f"Unknown configuration '{name}'")
                continue
            out[name] = self.defs[name].parse(value)
        return out


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java .properties file (comments, `=`/`:` separators, line continuations)."""
    props: dict[str, str] = {}
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        m = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", line)
        if m:
            props[m.group(1).replace("\\", "")] = m.group(2)
        else:
            props[line] = ""
    return props
