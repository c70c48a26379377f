"""`odradek health`'s alarms from made-up cluster views: what one broker cannot show."""

from __future__ import annotations

from odradek.client.health import (
    Alarm,
    BrokerView,
    ClusterView,
    GroupView,
    LogDirView,
    PartitionView,
    Thresholds,
    assess,
    leader_balance,
)

GIB = 1 << 30


def view(partitions: list[PartitionView] | None = None, log_dirs: list[LogDirView] | None = None,
         groups: list[GroupView] | None = None, controller: int | None = 1) -> ClusterView:
    brokers = [BrokerView(i, "h", 9092) for i in (1, 2, 3)]
    return ClusterView("c", controller, brokers, partitions or [], log_dirs or [], groups or [])


def p(index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionView:
    return PartitionView("t", index, leader, replicas, isr)


def texts(alarms: list[Alarm], fatal: bool = True) -> list[str]:
    return [a.text for a in alarms if a.fatal == fatal]


def test_a_healthy_cluster_raises_no_alarm() -> None:
    v = view([p(0, 1, (1, 2, 3), (1, 2, 3)), p(1, 2, (2, 3, 1), (2, 3, 1))],
             [LogDirView(1, "/d", None, 100 * GIB, 50 * GIB, 2, GIB)],
             [GroupView("g", "Stable", 2, 0, 0, "OK", (("t", 0, 0, "OK"),))])
    assert assess(v, Thresholds()) == []


def test_offline_and_shrunk_partitions_and_no_controller_are_alarms() -> None:
    v = view([p(0, -1, (1, 2, 3), ()), p(1, 1, (1, 2, 3), (1, 2)), p(2, 1, (1, 2, 3), (1,))],
             controller=None)
    alarms = texts(assess(v, Thresholds()))
    assert alarms[0].startswith("no active controller")
    assert alarms[1].startswith("1 offline partition(s)") and "t-0" in alarms[1]
    assert alarms[2].startswith("2 partition(s) with in-sync/replicas below 1")
    # 2 of 3 in sync is acceptable at a ratio of 0.6; 1 of 3 is not
    relaxed = texts(assess(v, Thresholds(min_isr_ratio=0.6)))
    assert any("1 partition(s) with in-sync/replicas below 0.6 (ISR shrank): t-2" in a
               for a in relaxed)


def test_a_full_or_offline_log_dir_is_an_alarm() -> None:
    v = view(log_dirs=[LogDirView(1, "/a", None, 100 * GIB, 5 * GIB, 1, GIB),
                       LogDirView(1, "/b", "KAFKA_STORAGE_ERROR", -1, -1, 0, 0),
                       LogDirView(2, "/c", None, 100 * GIB, 40 * GIB, 1, GIB)])
    assert texts(assess(v, Thresholds())) == [
        "broker 1: log dir /a is 95% full (> 85%)",
        "broker 1: log dir /b is offline (KAFKA_STORAGE_ERROR)",
    ]
    assert len(texts(assess(v, Thresholds(max_disk_used_pct=96)))) == 1


def test_leaders_piled_on_one_broker_warn_without_failing() -> None:
    parts = [p(i, 1, (2, 1, 3), (2, 1, 3)) for i in range(4)] + [p(9, 2, (2, 1, 3), (2, 1, 3))]
    v = view(parts)
    assert leader_balance(v)[2] == (1, 5, 4)
    assert leader_balance(v)[1] == (4, 0, 0)
    alarms = assess(v, Thresholds())
    assert texts(alarms) == []
    assert texts(alarms, fatal=False) == [
        "broker 2: 4 of the 5 partitions it should lead are led elsewhere (80% > 10%): "
        "leaders pile up on other brokers"]


def test_lag_over_the_limit_and_burrows_err_are_alarms_warn_is_not() -> None:
    groups = [
        GroupView("big", "Stable", 1, 500, 400, "OK", (("t", 0, 400, "OK"),)),
        GroupView("gone", "Empty", 0, 20, 20, "ERR", (("t", 0, 20, "STOP"),)),
        GroupView("slow", "Stable", 1, 30, 30, "WARN", (("t", 0, 30, "WARN"),)),
    ]
    alarms = assess(view(groups=groups), Thresholds(max_lag=100))
    assert texts(alarms) == [
        "group big: lag 500 > 100",
        "group gone: status ERR (STOP) — no member, offsets not moving",
    ]
    assert texts(alarms, fatal=False) == [
        "group slow: status WARN — lag grew at every sample, the consumers fall behind"]
    assert texts(assess(view(groups=groups), Thresholds())) == [
        "group gone: status ERR (STOP) — no member, offsets not moving"]
