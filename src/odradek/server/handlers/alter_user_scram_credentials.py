"""AlterUserScramCredentials (51): add, replace or delete users' SCRAM credentials.

The client sends the salted password (never the password); the broker keeps Kafka's
stored form — salt, stored key, server key, iterations — in the metadata store, where
SaslAuthenticate looks it up. Errors per user, as Kafka's: UNACCEPTABLE_CREDENTIAL (an
empty name, iterations outside 4096..16384, an empty salt or password),
UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE (a user named twice in one request),
RESOURCE_NOT_FOUND (deleting what is not there).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.sasl.scram import credential_from_salted
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 51
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def _check(user: str, mechanism: int, counts: Counter[str]) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if counts[user] > 1:
        return (ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request")
    if mechanism not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    results: dict[str, tuple[ErrorCode, str | None]] = {}
    users = ctx.metadata.image.user_configs
    for d in request.deletions:
        refused = _check(d.name, d.mechanism, counts)
        if refused is None and MECHANISMS[d.mechanism] not in users.get(d.name, {}):
            refused = (ErrorCode.resource_not_found,
                       "Attempt to delete a user credential that does not exist")
        if refused is not None:
            results[d.name] = refused
            continue
        try:
            await ctx.metadata.alter_user_config(d.name, MECHANISMS[d.mechanism], None)
            results[d.name] = (ErrorCode.none, None)
        except KafkaError as e:
            results[d.name] = (e.code, str(e))
    for u in request.upsertions:
        refused = _check(u.name, u.mechanism, counts)
        if refused is None and not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            refused = (ErrorCode.unacceptable_credential,
                       f"Iterations {u.iterations} is outside the range "
                       f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
        if refused is None and (not u.salt or not u.salted_password):
            refused = (ErrorCode.unacceptable_credential,
                       "Credential salt and salted password must not be empty")
        if refused is not None:
            results[u.name] = refused
            continue
        mechanism = MECHANISMS[u.mechanism]
        credential = credential_from_salted(mechanism, bytes(u.salted_password),
                                            bytes(u.salt), u.iterations)
        try:
            await ctx.metadata.alter_user_config(u.name, mechanism, str(credential))
            results[u.name] = (ErrorCode.none, None)
        except KafkaError as e:
            results[u.name] = (e.code, str(e))
    return build(ctx.schema.AlterUserScramCredentialsResponse, results=tuple(
        build(ctx.schema.AlterUserScramCredentialsResult, user=user, error_code=code,
              error_message=message)
        for user, (code, message) in results.items()))


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
