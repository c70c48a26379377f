"""AlterClientQuotas and DescribeClientQuotas through kafka-python's admin connection
(kafka-python 3 has the protocol messages): a round trip with `<default>` entities,
Kafka's error codes for bad input, filters, and quotas surviving a restart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from tests.conftest import BrokerProcess

INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData


class Quotas:
    def __init__(self, bootstrap: str, **config: Any) -> None:
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="quota-admin",
                                      **config)

    def _send(self, request: Any) -> Any:
        manager = self.admin._manager

        async def send() -> Any:
            return await manager.send(request)

        return manager.run(send)

    def alter(self, entity: dict[str, str | None], ops: dict[str, float | None],
              validate_only: bool = False) -> tuple[int, str | None]:
        request = AlterClientQuotasRequest(entries=[Entry(
            entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                 for k, v in ops.items()])], validate_only=validate_only)
        result = self._send(request).entries[0]
        return result.error_code, result.error_message

    def describe(self, components: list[tuple[str, int, str | None]] | None = None,
                 strict: bool = False) -> Any:
        request = DescribeClientQuotasRequest(components=[
            Component(entity_type=t, match_type=m, match=n) for t, m, n in components or []],
            strict=strict)
        return self._send(request)

    def table(self, **kw: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        response = self.describe(**kw)
        assert response.error_code == 0, response.error_message
        return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
                {v.key: v.value for v in entry.values} for entry in response.entries}

    def close(self) -> None:
        self.admin.close()


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("quota-admin") / "data").start()
    try:
        yield process
    finally:
        process.stop()


def test_alter_and_describe_round_trip_with_defaults(quota_broker: BrokerProcess) -> None:
    q = Quotas(quota_broker.bootstrap)
    try:
        assert q.alter({"user": "alice"}, {"producer_byte_rate": 1024,
                                           "request_percentage": 50.5}) == (0, None)
        assert q.alter({"user": "alice", "client-id": None},
                       {"consumer_byte_rate": 2048})[0] == 0
        assert q.alter({"client-id": None}, {"producer_byte_rate": 4096})[0] == 0
        table = q.table()
        assert table[(("user", "alice"),)] == {"producer_byte_rate": 1024.0,
                                               "request_percentage": 50.5}
        assert table[(("user", "alice"), ("client-id", None))] == {"consumer_byte_rate": 2048.0}
        assert table[(("client-id", None),)] == {"producer_byte_rate": 4096.0}
        # filters: exact, default, any-specified, strict
        assert set(q.table(components=[("user", 0, "alice")])) == {
            (("user", "alice"),), (("user", "alice"), ("client-id", None))}
        assert set(q.table(components=[("user", 0, "alice")], strict=True)) == {
            (("user", "alice"),)}
        assert set(q.table(components=[("client-id", 1, None)], strict=True)) == {
            (("client-id", None),)}
        assert set(q.table(components=[("client-id", 2, None)])) == {
            (("user", "alice"), ("client-id", None)), (("client-id", None),)}
        # removal, and validate_only stores nothing
        assert q.alter({"user": "alice"}, {"request_percentage": None})[0] == 0
        assert q.alter({"user": "bob"}, {"producer_byte_rate": 1}, validate_only=True)[0] == 0
        table = q.table()
        assert table[(("user", "alice"),)] == {"producer_byte_rate": 1024.0}
        assert (("user", "bob"),) not in table
    finally:
        q.close()


def test_bad_alterations_get_kafkas_errors_and_change_nothing(
        quota_broker: BrokerProcess) -> None:
    q = Quotas(quota_broker.bootstrap)
    try:
        before = q.table()
        code, message = q.alter({"user": "carol"}, {"producer_byte_rate": -5})
        assert code == INVALID_REQUEST and message and "greater than 0" in message
        code, message = q.alter({"user": "carol"}, {"no_such_quota": 5})
        assert code == INVALID_REQUEST and message and "no_such_quota" in message
        code, message = q.alter({"group": "g"}, {"producer_byte_rate": 5})
        assert code == INVALID_REQUEST and message and "group" in message
        code, _ = q.alter({"user": "carol"}, {"producer_byte_rate": 1.5})
        assert code == INVALID_REQUEST
        code, _ = q.alter({"user": ""}, {"producer_byte_rate": 10})
        assert code == INVALID_REQUEST
        code, _ = q.alter({"ip": "1.2.3.4", "user": "x"}, {"connection_creation_rate": 10})
        assert code == INVALID_REQUEST
        assert q.table() == before
        bad = q.describe(components=[("group", 0, "g")])
        assert bad.error_code == UNSUPPORTED_VERSION
        bad = q.describe(components=[("user", 0, None)])
        assert bad.error_code == INVALID_REQUEST and "MATCH_TYPE_EXACT" in bad.error_message
        bad = q.describe(components=[("user", 1, None), ("user", 2, None)])
        assert bad.error_code == INVALID_REQUEST
    finally:
        q.close()


def test_quotas_survive_a_restart(tmp_path: Any) -> None:
    process = BrokerProcess(tmp_path / "data").start()
    try:
        q = Quotas(process.bootstrap)
        assert q.alter({"user": None, "client-id": "c1"}, {"producer_byte_rate": 100000})[0] == 0
        q.close()
        process.restart()
        q = Quotas(process.bootstrap)
        assert q.table() == {(("user", None), ("client-id", "c1")): {
            "producer_byte_rate": 100000.0}}
        q.close()
    finally:
        process.stop()
