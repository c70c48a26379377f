"""Feature flags as a Kafka 4 broker reports them (ApiVersions v3+) and UpdateFeatures
(57): kafka-python's describe_features/update_features and the raw wire at every
version. Debian's kcat reading the same ApiVersions: tests/clients/test_kcat.py."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from odradek.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess
from tests.wire import WireClient


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_kafka_python_reads_the_finalized_features(admin: KafkaAdminClient) -> None:
    features = admin.describe_features()
    assert features["metadata.version"] == {"supported": (25, 25), "finalized": (25, 25),
                                            "finalized_epoch": 1}
    assert features["group.version"]["finalized"] == (1, 1)
    # KIP-890 part 2, finalized at 2 as Kafka 4 finalizes it for a new cluster
    assert features["transaction.version"]["finalized"] == (2, 2)


def test_an_update_to_the_current_level_is_accepted(admin: KafkaAdminClient) -> None:
    assert admin.update_features({"group.version": 1, "metadata.version": 25}) == {
        "group.version": "OK", "metadata.version": "OK"}


@pytest.mark.parametrize(("update", "why"), [
    ({"group.version": ("SAFE_DOWNGRADE", 0)},
     "Invalid update version 0 for feature group.version. Local controller 1 only "
     "supports versions 1-1"),
    ({"group.version": 0},
     "Can't downgrade the version of this feature without setting the upgrade type"),
    ({"transaction.version": ("SAFE_DOWNGRADE", 1)}, "only supports versions 2-2"),
    ({"no.such.feature": 1}, "Local controller 1 does not support this feature."),
])
def test_a_level_odradek_cannot_honour_is_refused(admin: KafkaAdminClient,
                                                  update: dict[str, object],
                                                  why: str) -> None:
    with pytest.raises(InvalidUpdateVersionError, match=why.replace(".", r"\.")):
        admin.update_features(update)
    assert admin.describe_features()["group.version"]["finalized"] == (1, 1)


@pytest.mark.parametrize("version", [0, 1])
def test_older_versions_repeat_the_error_per_feature(broker: BrokerProcess,
                                                     version: int) -> None:
    with WireClient(broker.bootstrap) as w:
        m = w.schema(57, version)
        key = {"allow_downgrade": False} if version == 0 else {"upgrade_type": 1}
        response = w.call(57, version, timeout=datetime.timedelta(seconds=5),
                          feature_updates=(
                              m.FeatureUpdateKey(feature="group.version", max_version_level=1,
                                                 **key),
                              m.FeatureUpdateKey(feature="metadata.version",
                                                 max_version_level=30, **key)),
                          **({"validate_only": False} if version else {}))
    assert response.error_code == ErrorCode.invalid_update_version
    assert [(r.feature, r.error_code) for r in response.results] == [
        ("group.version", ErrorCode.invalid_update_version),
        ("metadata.version", ErrorCode.invalid_update_version)]
    assert "metadata.version" in response.error_message


@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_features_ride_in_api_versions_v3_and_later(broker: BrokerProcess,
                                                   version: int) -> None:
    with WireClient(broker.bootstrap) as w:
        fields = {"client_software_name": "librdkafka", "client_software_version": "2.0.2"}
        response = w.call(18, version, **(fields if version >= 3 else {}))
    assert response.error_code == ErrorCode.none
    names = [f.name for f in getattr(response, "finalized_features", ())]
    assert names == (["group.version", "metadata.version", "transaction.version"]
                     if version >= 3 else [])
