"""The authorization matrix: for every API the broker serves, a principal without the
permission Kafka's broker checks gets Kafka's error code and nothing changes (no topic
created or deleted, no offset committed, no config altered, no record appended); with
the ACL it needs, the same call works.

The list of APIs is security/operations.py's table and the broker's handlers: an API
with no case here fails the test. Raw requests over SASL_PLAINTEXT (PLAIN) on one
broker for the module; every grant is removed after its case, so cluster-wide grants
do not leak into the next one. `admin` is a super user and sets up what a case needs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.security.authz_cases_admin
import tests.security.authz_cases_clients
import tests.security.authz_cases_share  # noqa: F401 - they register their cases
from odradek.security.operations import OPERATIONS
from odradek.server.handlers import HANDLERS
from tests.conftest import BrokerProcess, free_port
from tests.security.authz import CASES, JAAS, SHARE_APIS, Matrix, Session


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    sasl_port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("matrix") / "data", overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
    })
    process.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{process.port},"
                                      f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    process.start()
    m: Matrix | None = None
    try:
        m = Matrix(sasl_port)
        m.ready()
        yield m
    finally:
        if m is not None:
            m.admin.close()
            m.alice.close()
        process.stop()


@pytest.mark.parametrize("api_key", sorted(set(OPERATIONS) | set(HANDLERS)))
def test_a_principal_without_the_permission_is_refused_and_with_it_served(
        matrix: Matrix, api_key: int) -> None:
    if api_key in SHARE_APIS:
        pytest.skip(f"{SHARE_APIS[api_key]}: the share groups' own authorization tests "
                    "cover it (share helper)")
    assert api_key in CASES, f"no authorization matrix case for API {api_key} " \
                             f"({OPERATIONS[api_key].name if api_key in OPERATIONS else '?'})"
    matrix.alice.close()  # a fresh connection: a failed case leaves nothing behind
    matrix.alice = Session(matrix.port, "alice")
    CASES[api_key](matrix)


