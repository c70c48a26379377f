"""DescribeUserScramCredentials (50): which SCRAM mechanisms (and iterations) each user
has — never the credential itself."""

from __future__ import annotations

from collections import Counter
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.sasl.scram import ScramCredential
from odradek.server.handlers.alter_user_scram_credentials import MECHANISMS
from odradek.server.handlers.base import ApiHandler, RequestContext, build

API_KEY = 50
_CODES = {name: code for code, name in MECHANISMS.items()}


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    users = ctx.metadata.image.user_configs
    wanted = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(wanted)
    results = []
    for user in dict.fromkeys(wanted):
        infos = tuple(
            build(schema.CredentialInfo, mechanism=_CODES[mech],
                  iterations=ScramCredential.parse(value).iterations)
            for mech, value in sorted(users.get(user, {}).items()) if mech in _CODES)
        code, message = ErrorCode.none, None
        if counts[user] > 1:
            code = ErrorCode.duplicate_resource
            message = ("Cannot describe SCRAM credentials for the same user twice in a "
                       f"single request: {user}")
        elif not infos:
            code = ErrorCode.resource_not_found
            message = f"Attempt to describe nonexistent user: {user}"
        results.append(build(schema.DescribeUserScramCredentialsResult, user=user,
                             error_code=code, error_message=message,
                             credential_infos=infos if code == ErrorCode.none else ()))
    return build(schema.DescribeUserScramCredentialsResponse, error_code=ErrorCode.none,
                 error_message=None, results=tuple(results))


HANDLER = ApiHandler(API_KEY, 0, 0, handle)
