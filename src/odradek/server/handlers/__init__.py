"""One module per Kafka API; `HANDLERS` maps an API key to its handler.

Adding an API is one new module here and one line in `_MODULES`.
"""

from __future__ import annotations

from odradek.server.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
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
)

HANDLERS: dict[int, ApiHandler] = {m.HANDLER.api_key: m.HANDLER for m in _MODULES}
