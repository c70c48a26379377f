"""ElectLeaders (43): preferred or unclean leader election for some or all partitions.

v0 has no election type (preferred only) and no top-level error; a null partition list
(v1+) means every partition, and then the partitions that needed no election are left
out of the answer, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.handlers.base import ApiHandler, RequestContext, build, to_ms
from odradek.server.partition_admin import PREFERRED, all_partitions, elect_leaders

API_KEY = 43


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    election = int(getattr(request, "election_type", PREFERRED))
    everything = request.topic_partitions is None
    if everything:
        tps = all_partitions(ctx.metadata.image)
    else:
        tps = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    timeout_s = max(to_ms(request.timeout), 1) / 1000

    async def run() -> Any:
        try:
            outcomes = await elect_leaders(ctx.metadata, election, tps, timeout_s)
        except KafkaError as e:
            return build(schema.ElectLeadersResponse, error_code=e.code,
                         replica_election_results=())
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), (code, message) in outcomes.items():
            if everything and code == ErrorCode.election_not_needed:
                continue
            by_topic.setdefault(topic, []).append(build(
                schema.PartitionResult, partition_id=partition, error_code=code,
                error_message=message))
        return build(schema.ElectLeadersResponse, error_code=ErrorCode.none,
                     replica_election_results=tuple(
                         build(schema.ReplicaElectionResult, topic=topic,
                               partition_result=tuple(results))
                         for topic, results in by_topic.items()))

    return run()


HANDLER = ApiHandler(API_KEY, 0, 2, handle)
