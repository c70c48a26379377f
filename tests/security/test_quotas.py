"""Client quotas: Kafka's precedence, its sampled rate and throttle arithmetic, and a
simulated producer that obeys throttle_time_ms held to its byte rate."""

from __future__ import annotations

import pytest

from odradek.security.quotas import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    ConnectionRateQuota,
    InvalidQuota,
    QuotaConfigs,
    Rate,
    request_time_percentage,
)

P = PRODUCER_BYTE_RATE


def test_precedence_is_kafkas_eight_levels() -> None:
    q = QuotaConfigs()
    levels = [
        ({"user": "alice", "client-id": "app"}, 1),
        ({"user": "alice", "client-id": None}, 2),
        ({"user": "alice"}, 3),
        ({"user": None, "client-id": "app"}, 4),
        ({"user": None, "client-id": None}, 5),
        ({"user": None}, 6),
        ({"client-id": "app"}, 7),
        ({"client-id": None}, 8),
    ]
    for entity, value in levels:
        q.alter(entity, P, float(value * 1000))
    for entity, value in levels:
        assert q.resolve(P, "alice", "app")[1] == value * 1000
        q.alter(entity, P, None)
    assert q.resolve(P, "alice", "app") == (("", "app"), None)


def test_clients_of_a_user_quota_share_one_rate_and_others_are_untouched() -> None:
    q = QuotaConfigs()
    q.alter({"user": "alice"}, P, 1000.0)
    m = ClientQuotaManager(q, P)
    assert m.record("alice", "a", 6000, 0) == 0  # 6000 B over the 10 s minimum window
    assert m.record("alice", "b", 6000, 0) == 2000  # same user: one rate, now 1200 B/s
    assert m.record("bob", "a", 10**9, 0) == 0  # no quota for bob


def test_throttle_time_is_kafkas_formula() -> None:
    # 11 samples of 1 s: the window is at least 10 s; 1500 B at t=0 against 100 B/s is
    # 150 B/s, so (150-100)/100 * 10 s = 5 s
    rate = Rate()
    rate.record(1500, 0)
    assert rate.window_size_ms(0) == 10_000 and rate.measure(0) == 150.0
    q = QuotaConfigs()
    q.alter({"client-id": "c"}, CONSUMER_BYTE_RATE, 100.0)
    m = ClientQuotaManager(q, CONSUMER_BYTE_RATE)
    assert m.record("", "c", 1500, 0) == 5000
    m.unrecord("", "c", 1500, 0)  # a throttled fetch answers empty and takes it back
    assert m.rate("", "c", 0) == 0.0


def test_request_percentage_throttle_is_bounded_by_one_window() -> None:
    q = QuotaConfigs()
    q.alter({"user": "alice"}, REQUEST_PERCENTAGE, 10.0)
    m = ClientQuotaManager(q, REQUEST_PERCENTAGE)
    busy = request_time_percentage(5 * 10**9)  # 5 s of one request thread
    assert busy == 500.0
    assert m.record("alice", "x", busy, 0) == 1000


@pytest.mark.parametrize("rate_limit", [10_000.0, 250_000.0])
def test_an_obedient_producer_is_held_to_its_byte_rate(rate_limit: float) -> None:
    """Send 16 KiB whenever not throttled; wait out each throttle as a client does."""
    q = QuotaConfigs()
    q.alter({"user": "slow"}, P, rate_limit)
    m = ClientQuotaManager(q, P)
    now, sent, chunk, end = 0, 0, 16384, 120_000
    while now < end:
        wait = m.record("slow", "p", chunk, now)
        sent += chunk
        now += max(wait, 1)
    achieved = sent / (end / 1000)
    assert abs(achieved - rate_limit) / rate_limit < 0.2, achieved
    fast = ClientQuotaManager(q, P)
    assert all(fast.record("fast", "p", chunk, t) == 0 for t in range(0, 1000, 10))


@pytest.mark.parametrize(
    ("entity", "key", "value", "message"),
    [
        ({}, P, 1.0, "Invalid empty client quota entity"),
        ({"group": "g"}, P, 1.0, "Unhandled client quota entity type: group"),
        ({"user": ""}, P, 1.0, "Empty user not supported"),
        ({"user": "a"}, "bogus", 1.0, "Invalid configuration key bogus"),
        ({"user": "a"}, P, -5.0, f"Quota {P} must be greater than 0"),
        ({"user": "a"}, P, 0.0, "must be greater than 0"),
        ({"user": "a"}, P, 1.5, f"{P} cannot be a fractional value."),
        ({"ip": "1.2.3.4", "user": "a"}, CONNECTION_CREATION_RATE, 1.0, "IP entity should"),
        ({"ip": "not an ip"}, CONNECTION_CREATION_RATE, 1.0, "is not a valid IP"),
        ({"ip": "1.2.3.4"}, P, 1.0, f"Invalid configuration key {P}"),
        ({"ip": "1.2.3.4"}, "controller_mutation_rate", 1.0, "Invalid configuration key"),
        ({"user": "a"}, "controller_mutation_rate", -1.0, "must be greater than 0"),
    ],
)
def test_quotas_kafka_refuses_are_refused(entity: dict[str, str | None], key: str,
                                          value: float, message: str) -> None:
    with pytest.raises(InvalidQuota) as err:
        QuotaConfigs().alter(entity, key, value)
    assert message in err.value.message and err.value.code.name == "invalid_request"


def test_describe_and_zookeeper_paths() -> None:
    q = QuotaConfigs()
    q.alter({"user": "alice", "client-id": None}, P, 1024.0)
    q.alter({"ip": None}, CONNECTION_CREATION_RATE, 10.0)
    assert list(q.describe()) == [({"user": "alice", "client-id": None}, {P: 1024.0}),
                                  ({"ip": None}, {CONNECTION_CREATION_RATE: 10.0})]
    assert QuotaConfigs.zk_path({"user": "alice", "client-id": None}) == (
        "/config/users/alice/clients/<default>")
    assert QuotaConfigs.zk_path({"client-id": "c"}) == "/config/clients/c"
    assert QuotaConfigs.zk_path({"ip": None}) == "/config/ips/<default>"


def test_connection_creation_rate_per_ip_and_per_listener() -> None:
    q = QuotaConfigs()
    q.alter({"ip": "10.0.0.1"}, CONNECTION_CREATION_RATE, 2.0)
    limiter = ConnectionRateQuota(q)
    delays = [limiter.record("10.0.0.1", t) for t in range(0, 100, 1)]
    assert delays[:20] == [0] * 20 and delays[-1] > 0  # 20 fit in the 10 s window at 2/s
    assert limiter.record("10.0.0.2", 100) == 0
    wide = ConnectionRateQuota(QuotaConfigs(), max_rate=5.0)
    assert max(wide.record(f"10.0.1.{i}", i) for i in range(100)) > 0


def test_zookeeper_config_znodes_set_and_clear_quotas() -> None:
    from odradek.security.sasl.scram import make_credential, user_config_value

    q = QuotaConfigs()
    value = user_config_value({"producer_byte_rate": "1024", "request_percentage": "50.5"},
                              "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "pw"))
    q.apply_zk_config("/config/users/alice/clients/<default>", value)
    assert q.resolve(P, "alice", "x")[1] == 1024.0
    assert q.resolve(REQUEST_PERCENTAGE, "alice", "x")[1] == 50.5
    q.apply_zk_config("/config/users/alice/clients/<default>",
                      b'{"version":1,"config":{"producer_byte_rate":"2048"}}')
    assert q.resolve(P, "alice", "x")[1] == 2048.0
    assert q.resolve(REQUEST_PERCENTAGE, "alice", "x")[1] is None
    q.apply_zk_config("/config/ips/<default>",
                      b'{"version":1,"config":{"connection_creation_rate":"20"}}')
    assert q.ip_rate("1.1.1.1") == 20.0
    q.apply_zk_config("/config/users/alice/clients/<default>", None)
    assert q.entities == {}
    for path, data in (("/config/topics/t", b"{}"),
                       ("/config/users/a", b'{"version":1,"config":{"producer_byte_rate":"x"}}'),
                       ("/config/users/a", b'{"version":1,"config":{"producer_byte_rate":"-1"}}'),
                       ("/config/users/a", b"\xff")):
        with pytest.raises(InvalidQuota):
            q.apply_zk_config(path, data)
