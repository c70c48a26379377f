"""One module per Kafka API; `HANDLERS` maps an API key to its handler.

Adding an API is one new module here and one line in `_MODULES`.
"""

from __future__ import annotations

from odradek.server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from odradek.server.handlers.base import ApiHandler

_MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    describe_log_dirs,
    init_producer_id,
    # log lifecycle
    delete_records,
    alter_replica_log_dirs,
    # consumer groups
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    consumer_group_heartbeat,
    consumer_group_describe,
    # transactions
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    write_txn_markers,
    describe_transactions,
    list_transactions,
    describe_producers,
    # cluster operations
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
)

HANDLERS: dict[int, ApiHandler] = {m.HANDLER.api_key: m.HANDLER for m in _MODULES}
