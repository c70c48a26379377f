"""kafka-features.sh as Kafka 4's FeatureCommand: describe, a dry run, a downgrade and an
upgrade of transaction.version, and a refused level with Kafka's lines and exit code."""

from __future__ import annotations

from tests.kafka_tools.conftest import Run


def _levels(kafka: Run, bootstrap: list[str]) -> dict[str, str]:
    out = kafka("kafka-features.sh", *bootstrap, "describe")
    assert out.returncode == 0, out.stderr
    return {fields["Feature"]: fields["FinalizedVersionLevel"]
            for line in out.stdout.splitlines()
            for fields in [dict(f.split(": ", 1) for f in line.split("\t"))]}


def test_describe_prints_featurecommands_lines(kafka: Run, bootstrap: list[str]) -> None:
    out = kafka("kafka-features.sh", *bootstrap, "describe")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Feature: group.version\tSupportedMinVersion: 1\tSupportedMaxVersion: 1\t"
        "FinalizedVersionLevel: 1\tEpoch: 1",
        "Feature: metadata.version\tSupportedMinVersion: 4.0-IV3\tSupportedMaxVersion: "
        "4.0-IV3\tFinalizedVersionLevel: 4.0-IV3\tEpoch: 1",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        "FinalizedVersionLevel: 2\tEpoch: 1"]


def test_downgrade_and_upgrade_transaction_version(kafka: Run, bootstrap: list[str]) -> None:
    dry = kafka("kafka-features.sh", *bootstrap, "downgrade", "--feature",
                "transaction.version=1", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "transaction.version can be downgraded to 1.\n")
    assert _levels(kafka, bootstrap)["transaction.version"] == "2"
    down = kafka("kafka-features.sh", *bootstrap, "downgrade", "--feature",
                 "transaction.version=1")
    assert (down.returncode, down.stdout) == (0, "transaction.version was downgraded to 1.\n")
    assert _levels(kafka, bootstrap)["transaction.version"] == "1"
    refused = kafka("kafka-features.sh", *bootstrap, "upgrade", "--feature",
                    "transaction.version=3")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "Could not upgrade transaction.version to 3. The update failed for all features "
        "since the following feature had an error: Invalid update version 3 for feature "
        "transaction.version. Local controller 1 only supports versions 0-2\n",
        "1 out of 1 operation(s) failed.\n")
    up = kafka("kafka-features.sh", *bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert (up.returncode, up.stdout) == (0, "transaction.version was upgraded to 2.\n")
    assert _levels(kafka, bootstrap)["transaction.version"] == "2"
