"""Feature flags (KIP-584, KIP-778, KIP-1022) as a Kafka 4 broker reports and changes them.

A Kafka 4 broker tells clients, in ApiVersions v3+, which versions of each feature it
supports and at which level the cluster has finalized it; clients pick protocols by
them (a Java producer uses KIP-890's transaction flow only at transaction.version 2).
The finalized levels live in the metadata image (`MetadataImage.features`): the
embedded store keeps them in its change log, a ZooKeeper cluster in Kafka's `/feature`
znode. UpdateFeatures changes them; a new cluster starts at Kafka 4's levels.
- metadata.version 25 (4.0-IV3): the 4.0 protocol set odradek serves; only that level
  is supported, since odradek cannot serve an older protocol set;
- group.version 1: the KIP-848 consumer group protocol is served (always: supporting 0
  would claim we refuse it at 0);
- transaction.version 0-2, finalized at 2 for a new cluster (KIP-890 part 2). As in
  Kafka, the level tells clients which protocol to use; the broker serves each request
  by its version: EndTxn v5 ends a transaction with an epoch bump, Produce v12 and
  TxnOffsetCommit v5 add their partitions to the transaction themselves, while older
  versions keep transaction version 1's protocol. Kafka 4 advertises those API
  versions whatever the level is; so does odradek. The level decides how the
  coordinator's own aborts (timeouts, fences) bump the epoch, and whether EndTxn v5
  bumps it (below 2 it answers as version 1 does). Levels 0 and 1 differ in Kafka only
  in the transaction log's record format, which no client sees.
A level-0 feature is not listed as finalized, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataImage


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int


FEATURES: tuple[Feature, ...] = (
    Feature("group.version", 1, 1),
    Feature("metadata.version", 25, 25),
    Feature("transaction.version", 0, 2),
)
BY_NAME = {f.name: f for f in FEATURES}
# Kafka's UpgradeType (FeatureUpdate.UpgradeType)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def level(name: str, image: MetadataImage) -> int:
    """The finalized level of a feature in the cluster (0 when it is not finalized)."""
    return image.features.get(name, 0)


def finalized(image: MetadataImage) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((n, v) for n, v in image.features.items() if v > 0))


def update_error(name: str, level: int, upgrade_type: int, current: Mapping[str, int],
                 node_id: int) -> str | None:
    """Why the finalized level of `name` cannot become `level` (Kafka's controller's
    checks and words, FeatureControlManager.updateFeature), or None when it can."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    feature = BY_NAME.get(name)
    if feature is None:
        return _invalid(name, level, f"Local controller {node_id} does not support this feature.")
    if not feature.min_version <= level <= feature.max_version:
        return _invalid(name, level, f"Local controller {node_id} only supports versions "
                        f"{feature.min_version}-{feature.max_version}")
    now = current.get(name, 0)
    if level < now and upgrade_type == UPGRADE:
        return _invalid(name, level, "Can't downgrade the version of this feature without "
                        "setting the upgrade type to either safe or unsafe downgrade.")
    if level > now and upgrade_type != UPGRADE:
        return _invalid(name, level, "Can't downgrade to a newer version.")
    return None


def _invalid(name: str, level: int, why: str) -> str:
    return f"Invalid update version {level} for feature {name}. {why}"
