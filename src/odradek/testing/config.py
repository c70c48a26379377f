"""Broker properties for test brokers: defaults that fit tests, and refusal of names
Kafka's broker does not have (a typo would otherwise be silently ignored)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping

__all__ = ["TEST_DEFAULTS", "TestkitError", "broker_properties", "temp_root"]


class TestkitError(RuntimeError):
    """A test broker could not do what was asked; the message is one line naming why."""

    __test__ = False  # not a test class, whatever pytest's collection thinks of the name


# Why each differs from the broker's defaults: tests want topics on first use, one
# broker's worth of internal-topic replicas, groups that form at once, small files, and
# internal topics that are quick to create (each partition is a log with its files).
TEST_DEFAULTS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": "1048576",
    "offsets.topic.segment.bytes": "1048576",
    "transaction.state.log.segment.bytes": "1048576",
}


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_properties(config: Mapping[str, str | int | float | bool] | None,
                      defaults: Mapping[str, str] = TEST_DEFAULTS) -> dict[str, str]:
    """The properties a test broker starts with; raises TestkitError naming an unknown one."""
    from odradek.broker_properties import BROKER_CONFIGS
    from odradek.configdef import ConfigError

    props = dict(defaults)
    for name, value in (config or {}).items():
        if name not in BROKER_CONFIGS:
            known = [d.name for d in BROKER_CONFIGS]
            near = difflib.get_close_matches(name, known, n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise TestkitError(f"unknown broker property {name!r}{hint}")
        if name in ("log.dirs", "log.dir"):
            raise TestkitError(f"{name} is set by the test broker: pass data_dir= instead")
        if name == "listeners":
            raise TestkitError("listeners is set by the test broker: pass host= and port= "
                               "instead")
        props[name] = _text(value)
        try:
            BROKER_CONFIGS[name].parse(props[name])
        except ConfigError as e:
            raise TestkitError(str(e)) from None
    return props


def temp_root() -> str | None:
    """Where test brokers keep their temporary data: $ODRADEK_TEST_TMPDIR, else /dev/shm
    when it is there, else the system's temp dir (None).

    In memory, a fresh broker starts, creates a topic and stops in a few milliseconds;
    on this machine's shared disk each file created, fsynced or unlinked costs several,
    which made a fresh broker's life cost ten times more.
    """
    chosen = os.environ.get("ODRADEK_TEST_TMPDIR")
    if chosen:
        return chosen
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return None
