"""docs/compatibility.md's table of Kafka 4.x APIs stays true: the versions odradek
advertises are the broker's, Kafka's column is Kafka's message definitions, every row
names a test that exists, and the APIs odradek does not serve are refused."""

from __future__ import annotations

import os
import re
from pathlib import Path

import kio.schema
import pytest
from kio.schema.index import api_key_map

from odradek.protocol.messages import encode_request, request_class
from odradek.server.handlers import HANDLERS
from tests.conftest import BrokerProcess
from tests.server.test_every_api import sample
from tests.wire import WireClient

ROOT = Path(__file__).parents[2]
_ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([\d-]+) \| ([\d-]+|—) \| `([^`]+)` \|$")


def _rows() -> list[tuple[int, str, str, str, str]]:
    doc = (ROOT / "docs" / "compatibility.md").read_text()
    table = doc.split("<!-- BEGIN API TABLE -->\n")[1].split("<!-- END API TABLE -->")[0]
    rows = []
    for line in table.splitlines()[2:]:
        m = _ROW.match(line)
        assert m, f"malformed row: {line}"
        rows.append((int(m[1]), m[2], m[3], m[4], m[5]))
    return rows


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def test_served_versions_are_what_the_broker_advertises() -> None:
    rows = {key: ours for key, _, _, ours, _ in _rows()}
    for key, h in HANDLERS.items():
        assert rows.get(key) == _range(h.min_version, h.max_version), f"API {key}"
    assert {k for k, ours in rows.items() if ours != "—"} == set(HANDLERS)


def _kafka_versions(key: int) -> list[int]:
    base = Path(os.path.dirname(kio.schema.__file__)) / api_key_map[key]
    return sorted(int(v.name[1:]) for v in base.iterdir()
                  if v.name[:1] == "v" and v.name[1:].isdigit())


def test_the_kafka_column_is_kafkas_message_definitions() -> None:
    for key, _, kafka, _, _ in _rows():
        versions = _kafka_versions(key)
        assert kafka == _range(versions[0], versions[-1]), f"API {key}"


def test_every_row_names_a_test_that_exists() -> None:
    for key, _, _, _, test in _rows():
        path, name = test.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), f"API {key}: {test}"


UNSERVED = [key for key, *_ in _rows() if key not in HANDLERS]


@pytest.mark.parametrize("api_key", UNSERVED)
def test_apis_odradek_does_not_serve_are_refused(broker: BrokerProcess, api_key: int) -> None:
    with WireClient(broker.bootstrap) as w:
        versions = w.call(18, 3, client_software_name="t", client_software_version="1")
        assert api_key not in {k.api_key for k in versions.api_keys}
        version = _kafka_versions(api_key)[0]
        body = sample(request_class(api_key, version), "t")
        w.send_raw(encode_request(api_key, version, 7, "t", body))
        with pytest.raises(ConnectionError):
            w.read_frame()
