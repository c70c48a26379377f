"""Describing and changing configs, shared by DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs and CreateTopics.

Topic configs resolve as Kafka resolves them: the topic's override, else the dynamic
cluster-wide broker default, else the broker's static property, else the built-in
default — and each entry can list those synonyms with their sources.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker_properties import BROKER_CONFIGS
from odradek.configdef import ConfigError
from odradek.protocol.errors import InvalidConfig, InvalidRequest, UnknownTopicOrPartition
from odradek.storage.log_config import BROKER_SYNONYMS, TOPIC_CONFIGS

if TYPE_CHECKING:
    from odradek.cluster.controller import MetadataController
    from odradek.storage.log_config import LogConfig


class ConfigView(Protocol):
    """The broker's configuration as handlers read it (static and dynamic values)."""

    def __getitem__(self, name: str) -> Any: ...

    def get(self, name: str, default: Any = None) -> Any: ...

    def source(self, name: str) -> str: ...

    def levels(self, name: str) -> dict[str, Any]: ...

    def values(self) -> dict[str, Any]: ...


class ConfigsPort(Protocol):
    """What describing and changing configs reads: the handlers' `Ports` is one."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> ConfigView: ...

    @property
    def metadata(self) -> MetadataController: ...

    @property
    def topic_config(self) -> Callable[[str], LogConfig]: ...


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type_code: int
    doc: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


_LEVELS = (("dynamic", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
           ("static", ConfigSource.STATIC_BROKER_CONFIG),
           ("default", ConfigSource.DEFAULT_CONFIG))


def _broker_source(ports: ConfigsPort, name: str) -> ConfigSource:
    where = ports.config.source(name)
    if where == "dynamic":
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    if where == "static":
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def describe_topic(ports: ConfigsPort, topic: str) -> list[ConfigEntry]:
    info = ports.metadata.image.topics.get(topic)
    if info is None:
        raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
    resolved = ports.topic_config(topic)
    entries = []
    for d in TOPIC_CONFIGS:
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if d.name in info.configs:
            synonyms.append((d.name, info.configs[d.name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        # as Kafka's ConfigHelper.configSynonyms: every synonym at one level, then the next
        chain = [prop for prop, _ in BROKER_SYNONYMS.get(d.name, ())]
        for level, level_source in _LEVELS:
            for prop in chain:
                found = ports.config.levels(prop)
                if level in found:
                    rendered = BROKER_CONFIGS[prop].render(found[level])
                    synonyms.append((prop, rendered, level_source))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        value = d.render(getattr(resolved, d.name.replace(".", "_")))
        entries.append(
            ConfigEntry(d.name, value, source, False, d.sensitive, d.type.describe_type,
                        d.doc, tuple(synonyms))
        )
    return entries


def describe_broker(ports: ConfigsPort) -> list[ConfigEntry]:
    entries = []
    for d in BROKER_CONFIGS:
        value = ports.config.get(d.name)
        source = _broker_source(ports, d.name)
        rendered = None if d.sensitive else d.render(value)
        synonyms = tuple((d.name, None if d.sensitive else d.render(v), level_source)
                         for level, level_source in _LEVELS
                         for v in [ports.config.levels(d.name).get(level)] if v is not None)
        entries.append(
            ConfigEntry(d.name, rendered, source, d.read_only, d.sensitive,
                        d.type.describe_type, d.doc, synonyms)
        )
    return entries


def check_broker_name(ports: ConfigsPort, name: str) -> None:
    if name not in ("", str(ports.node_id)):
        raise InvalidRequest(f"Unexpected broker id, expected {ports.node_id} or empty string, "
                             f"but received {name}")


async def apply_topic(
    ports: ConfigsPort, topic: str, ops: list[tuple[str, AlterOp, str | None]], *,
    incremental: bool, validate_only: bool,
) -> None:
    info = ports.metadata.image.topics.get(topic)
    if info is None:
        raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
    new: dict[str, str | None] = dict(info.configs) if incremental else {}
    for name, op, value in ops:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        _apply_op(new, name, op, value, TOPIC_CONFIGS[name].type.value == "LIST",
                  TOPIC_CONFIGS[name].default)
    cleaned = {k: v for k, v in new.items() if v is not None}
    ports.metadata.validate_topic_configs(cleaned)
    if not validate_only:
        await ports.metadata.set_topic_configs(topic, cleaned)


async def apply_broker(
    ports: ConfigsPort, ops: list[tuple[str, AlterOp, str | None]], *,
    incremental: bool, validate_only: bool,
) -> None:
    current: dict[str, str | None] = (
        dict(ports.metadata.image.broker_configs) if incremental else {}
    )
    for name, op, value in ops:
        if name not in BROKER_CONFIGS:
            raise InvalidConfig(f"Unknown broker config name: {name}")
        d = BROKER_CONFIGS[name]
        if d.read_only:
            raise InvalidConfig(f"Cannot update these configs dynamically: {{{name}}}")
        default = ports.config.get(name)
        _apply_op(current, name, op, value, d.type.value == "LIST", default)
    cleaned: dict[str, str] = {}
    for name, value in current.items():
        if value is None:
            continue
        try:
            BROKER_CONFIGS[name].parse(value)
        except ConfigError as e:
            raise InvalidConfig(str(e)) from None
        cleaned[name] = value
    if not validate_only:
        await ports.metadata.set_broker_configs(cleaned)


def _apply_op(
    target: dict[str, str | None], name: str, op: AlterOp, value: str | None, is_list: bool,
    default: Any,
) -> None:
    if op == AlterOp.SET:
        if value is None:
            raise InvalidConfig(f"Null value not supported for config {name}")
        target[name] = value
    elif op == AlterOp.DELETE:
        target.pop(name, None)
    elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
        if not is_list:
            raise InvalidConfig(
                f"Config value append is not allowed for config key: {name}"
                if op == AlterOp.APPEND
                else f"Config value subtract is not allowed for config key: {name}"
            )
        base = target.get(name)
        items = (
            [v.strip() for v in base.split(",") if v.strip()]
            if base is not None
            else list(default or [])
        )
        changes = [v.strip() for v in (value or "").split(",") if v.strip()]
        if op == AlterOp.APPEND:
            items += [c for c in changes if c not in items]
        else:
            items = [i for i in items if i not in changes]
        target[name] = ",".join(items)
    else:
        raise InvalidRequest(f"Unknown config operation {int(op)}")


def parse_op(code: int) -> AlterOp:
    try:
        return AlterOp(code)
    except ValueError:
        raise InvalidRequest(f"Unknown config operation {code}") from None


def overrides_as_mapping(configs: Mapping[str, str]) -> dict[str, Any]:
    """Topic overrides (strings) → parsed values for LogConfig.resolve."""
    return {name: TOPIC_CONFIGS[name].parse(v) for name, v in configs.items()
            if name in TOPIC_CONFIGS}
