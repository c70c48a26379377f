"""odradek as the embedded Kafka of Python test suites.

`EmbeddedBroker` runs a real broker in the test's process (or a child process),
`EmbeddedCluster` a replicated cluster of child processes on a local ZooKeeper, and each
broker's `faults` injects the errors, delays and disconnects real clusters produce.
Installing odradek registers a pytest plugin with the fixtures `odradek_broker`,
`odradek_broker_fresh` and `odradek_cluster` (see docs/testing.md).

Names are imported on first use, so importing this package (as the plugin and the
broker processes do) costs nothing until a broker is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.testing.cluster import EmbeddedCluster
    from odradek.testing.config import TEST_DEFAULTS, TestkitError
    from odradek.testing.embedded import EmbeddedBroker
    from odradek.testing.faults import Fault, FaultError, Faults

__all__ = ["TEST_DEFAULTS", "EmbeddedBroker", "EmbeddedCluster", "Fault", "FaultError",
           "Faults", "TestkitError"]

_WHERE = {
    "TEST_DEFAULTS": "config", "TestkitError": "config", "EmbeddedBroker": "embedded",
    "EmbeddedCluster": "cluster", "Fault": "faults", "FaultError": "faults",
    "Faults": "faults",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'odradek.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"odradek.testing.{module}"), name)
