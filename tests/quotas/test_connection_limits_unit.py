"""ConnectionLimits' arithmetic with a test clock: per-ip, per-listener and broker
counts, released slots, creation-rate delays, and an ip's connection_creation_rate
quota closing the connection after its throttle time."""

from __future__ import annotations

from odradek.security.quotas import QuotaConfigs
from odradek.server.connection_limits import ConnectionLimits


def test_counts_per_ip_listener_and_broker_and_their_release() -> None:
    limits = ConnectionLimits(max_connections=4, per_ip=2, per_ip_overrides={"10.0.0.9": 3},
                              listener_max={"EXTERNAL": 1})
    assert limits.admit("PLAINTEXT", "10.0.0.1").refused is None
    assert limits.admit("PLAINTEXT", "10.0.0.1").refused is None
    refused = limits.admit("PLAINTEXT", "10.0.0.1").refused
    assert refused is not None and "maximum of 2" in refused
    assert limits.admit("EXTERNAL", "10.0.0.9").refused is None
    refused = limits.admit("EXTERNAL", "10.0.0.9").refused
    assert refused is not None and "listener.name.external.max.connections" in refused
    assert limits.admit("PLAINTEXT", "10.0.0.9").refused is None  # the override: 3
    refused = limits.admit("PLAINTEXT", "10.0.0.2").refused
    assert refused is not None and "max.connections" in refused
    limits.release("PLAINTEXT", "10.0.0.1")
    assert limits.admit("PLAINTEXT", "10.0.0.2").refused is None
    assert limits.total == 4


def test_creation_rates_delay_and_an_ip_quota_closes() -> None:
    now = [0]
    quotas = QuotaConfigs()
    quotas.alter({"ip": "10.0.0.5"}, "connection_creation_rate", 2)
    limits = ConnectionLimits(listener_rate={"PLAINTEXT": 5}, ip_quotas=lambda: quotas,
                              clock_ms=lambda: now[0], samples=2, window_ms=1000)
    delays = [limits.admit("PLAINTEXT", "10.0.0.1").delay_ms for _ in range(10)]
    assert delays[:5] == [0] * 5 and delays[-1] == 1000  # (10 - 5) / 5 of a second
    now[0] = 5000
    first = limits.admit("OTHER", "10.0.0.5")
    second = limits.admit("OTHER", "10.0.0.5")
    third = limits.admit("OTHER", "10.0.0.5")
    assert not first.close_after_delay and not second.close_after_delay
    assert third.close_after_delay and third.delay_ms > 0


def test_the_inter_broker_listener_is_not_held_to_the_broker_wide_count() -> None:
    limits = ConnectionLimits.from_config(
        {"max.connections": 2, "max.connections.per.ip": 100,
         "max.connections.per.ip.overrides": "", "max.connection.creation.rate": 2**31 - 1
         }.__getitem__, {}, ["PLAINTEXT", "SASL_SSL"])
    assert limits.admit("SASL_SSL", "10.0.0.1").refused is None
    assert limits.admit("SASL_SSL", "10.0.0.2").refused is None
    assert limits.admit("SASL_SSL", "10.0.0.3").refused is not None
    assert limits.admit("PLAINTEXT", "10.0.0.4").refused is None  # a broker replicating
    single = ConnectionLimits.from_config(
        {"max.connections": 1, "max.connections.per.ip": 100,
         "max.connections.per.ip.overrides": "", "max.connection.creation.rate": 2**31 - 1
         }.__getitem__, {}, ["PLAINTEXT"])
    assert single.admit("PLAINTEXT", "10.0.0.1").refused is None
    assert single.admit("PLAINTEXT", "10.0.0.2").refused is not None
