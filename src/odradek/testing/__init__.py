"""odradek as the embedded Kafka of Python test suites.

`EmbeddedBroker` runs a real broker in the test's process (or a child process),
`EmbeddedCluster` a replicated cluster of child processes on a local ZooKeeper, and each
broker's `faults` injects the errors, delays and disconnects real clusters produce.
Installing odradek registers a pytest plugin with the fixtures `odradek_broker`,
`odradek_broker_fresh` and `odradek_cluster` (see docs/testing.md).
"""

from __future__ import annotations

from odradek.testing.config import TEST_DEFAULTS, TestkitError
from odradek.testing.embedded import EmbeddedBroker
from odradek.testing.faults import Fault, FaultError, Faults

__all__ = ["TEST_DEFAULTS", "EmbeddedBroker", "EmbeddedCluster", "Fault", "FaultError",
           "Faults", "TestkitError"]


def __getattr__(name: str) -> object:
    if name == "EmbeddedCluster":  # kazoo and ZooKeeper only for those who ask
        from odradek.testing.cluster import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
