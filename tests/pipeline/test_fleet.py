"""The simulated fleet: deterministic, keyed by device, a firmware update, some bad records."""

from __future__ import annotations

import json

from odradek.pipeline.fleet import TOPICS, FleetConfig, FleetRecord, FleetSimulator


def _records(seed: int = 7, firmware_update_after: int = 2_000,
             malformed_share: float = 0.005) -> list[FleetRecord]:
    sim = FleetSimulator(FleetConfig(start_ms=1_700_000_000_000, step_ms=100, seed=seed,
                                     firmware_update_after=firmware_update_after,
                                     malformed_share=malformed_share))
    return list(sim.records(4_000))


def test_same_seed_same_records() -> None:
    assert _records(seed=3) == _records(seed=3)
    assert _records(seed=3) != _records(seed=4)


def test_records_are_keyed_by_device_and_go_to_their_type_topic() -> None:
    for rec in _records():
        if rec.malformed:
            continue
        body = json.loads(rec.value)
        assert rec.key.decode() == body["device_id"]
        assert rec.topic == TOPICS[body["type"]]


def test_firmware_update_adds_a_field_and_changes_a_type() -> None:
    recs = _records(firmware_update_after=2_000, malformed_share=0.0)
    before = [json.loads(r.value) for r in recs[:2_000]]
    after = [json.loads(r.value) for r in recs[2_000:]]
    assert all(b["firmware"] == "1.4.2" and "signal_dbm" not in b for b in before)
    assert all(a["firmware"] == "2.0.0" and "signal_dbm" in a for a in after)
    temps_before = {type(b["temperature"]) for b in before if b["type"] == "climate"}
    temps_after = {type(a["temperature"]) for a in after if a["type"] == "climate"}
    assert temps_before == {int} and temps_after == {float}


def test_a_small_share_is_malformed() -> None:
    recs = _records(malformed_share=0.01)
    bad = [r for r in recs if r.malformed]
    assert 10 <= len(bad) <= 80
    for r in bad:
        try:
            json.loads(r.value)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        raise AssertionError(f"a malformed record parses: {r.value!r}")


def test_event_time_advances_by_the_step() -> None:
    recs = _records()
    assert recs[1].timestamp_ms - recs[0].timestamp_ms == 100
