"""What the console is started with, and which values must never reach a page."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

# A config whose name says it holds a secret is masked even when the broker does not flag
# it sensitive (Apache Kafka flags its own; a plugin's may not be).
_SECRET = re.compile(r"password|secret|sasl\.jaas|credential|token|\.key$|keystore\.key",
                     re.IGNORECASE)
MASK = "(sensitive)"


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def shown(name: str, value: str | None, sensitive: bool = False) -> str:
    """A config value as a page may show it."""
    if sensitive or is_secret(name):
        return MASK
    return "" if value is None else value


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap: str
    client_config: dict[str, str] = field(default_factory=dict)  # from --command-config
    read_only: bool = False
    lake_catalog_uri: str | None = None
    lake_warehouse: str | None = None
    refresh_s: float = 2.0  # how often the sampler asks the cluster
    history_s: float = 3600.0  # how far back the charts reach
    timeout_s: float = 10.0

    @property
    def secured(self) -> bool:
        """TLS or SASL: the requests no binding has (DescribeLogDirs, the transactions
        APIs) are sent on plain connections and cannot be asked."""
        return self.client_config.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT"

    def kafka_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for an admin client, consumer or producer."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "log_level": 3,
                                "client.id": "odradek-console",
                                # librdkafka's complaints go to logging, not the terminal
                                "logger": logging.getLogger("odradek.console.librdkafka")}
        conf.update(self.client_config)
        conf.update(extra)
        return conf
