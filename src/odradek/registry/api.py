"""Confluent's v1 REST API over the registry service, on Starlette.

Reads are answered here from the replayed state; writes go to the service if this
instance is the leader, else are forwarded unchanged to the leader's URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import unquote

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from odradek.registry import errors as e
from odradek.registry.acls import REGISTRY, REGISTRY_NAME, SUBJECT, AccessDenied, RegistryAuthorizer
from odradek.registry.auth import USER
from odradek.registry.formats import SCHEMA_TYPES
from odradek.registry.records import SchemaValue
from odradek.registry.service import (
    RegistryService,
    SchemaRequest,
    check_subject,
    parse_version,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARD_HEADERS = ("content-type", "accept", "authorization")


class Node(Protocol):
    """What the HTTP layer needs from a registry instance."""

    service: RegistryService
    max_request_bytes: int
    authorizer: RegistryAuthorizer | None  # None: every authenticated user may do anything

    def leader_url(self, timeout: float) -> Awaitable[str | None]: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def forwarder(self) -> httpx.AsyncClient: ...


def reply(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, ensure_ascii=False), status, media_type=CONTENT_TYPE)


# Subjects may hold "/" (confluent-kafka names Protobuf references after their files):
# an encoded slash stands in as a private-use character while the path is routed.
SLASH = "\ue000"


def _subject(request: Request, default: str | object | None = ...) -> Any:
    if default is not ... and "subject" not in request.path_params:
        return default
    return str(request.path_params["subject"]).replace(SLASH, "/")


def keep_encoded_slashes(app: ASGIApp) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%2f" in raw.lower():
            path = raw.split(b"?", 1)[0].decode("latin-1")
            path = re.sub("%2[fF]", "%EE%80%80", path)
            scope = {**scope, "path": unquote(path)}
        await app(scope, receive, send)
    return wrapped


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def schema_json(sv: SchemaValue, schema: str | None = None,
                with_subject: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if with_subject:
        out.update(subject=sv.subject, version=sv.version, id=sv.id)
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    out["schema"] = sv.schema if schema is None else schema
    return out


class RegistryApi:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.service = node.service

    async def body(self, request: Request) -> Any:
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.node.max_request_bytes:
                raise e.SchemaTooLarge(f"Request body larger than "
                                       f"{self.node.max_request_bytes} bytes")
        try:
            return json.loads(raw or b"{}")
        except ValueError as err:
            raise e.BadRequest(f"Unrecognized JSON body: {err}") from err

    def may(self, request: Request, operation: str, resource_type: str,
            name: str = REGISTRY_NAME) -> bool:
        authorizer = self.node.authorizer
        return authorizer is None or authorizer.allowed(
            str(request.scope.get(USER, "")), operation, resource_type, name)

    def formatted(self, sv: SchemaValue, fmt: str | None) -> str:
        if not fmt:
            return sv.schema
        return self.service.parsed_value(sv).formatted(fmt)

    # the routes

    async def root(self, request: Request) -> Response:
        return reply({})

    async def schema_types(self, request: Request) -> Response:
        return reply(list(SCHEMA_TYPES))

    async def subjects(self, request: Request) -> Response:
        prefix = request.query_params.get("subjectPrefix", "")
        names = self.service.state.subject_names(_flag(request, "deleted"))
        # filtered to what the user may see, as Confluent's and Redpanda's authorizers do
        return reply([s for s in names if s.startswith(prefix)
                      and self.may(request, "DESCRIBE", SUBJECT, s)])

    async def schemas(self, request: Request) -> Response:
        prefix = request.query_params.get("subjectPrefix", "")
        latest = _flag(request, "latestOnly")
        out = []
        for subject in self.service.state.subject_names(_flag(request, "deleted")):
            if subject.startswith(prefix) and self.may(request, "READ", SUBJECT, subject):
                found = self.service.state.versions(subject, _flag(request, "deleted"))
                out += [schema_json(sv) for sv in (found[-1:] if latest else found)]
        return reply(out)

    async def versions(self, request: Request) -> Response:
        subject = _subject(request)
        return reply(self.service.versions(subject, _flag(request, "deleted")))

    async def get_version(self, request: Request) -> Response:
        sv = self._version(request)
        return reply(schema_json(sv, self.formatted(sv, request.query_params.get("format"))))

    async def get_version_schema(self, request: Request) -> Response:
        sv = self._version(request)
        return Response(self.formatted(sv, request.query_params.get("format")),
                        media_type=CONTENT_TYPE)

    async def referenced_by(self, request: Request) -> Response:
        sv = self._version(request)
        return reply(self.service.state.referenced_by(sv.subject, sv.version))

    def _version(self, request: Request) -> SchemaValue:
        subject = _subject(request)
        version = parse_version(request.path_params["version"])
        return self.service.version(subject, version, _flag(request, "deleted"))

    async def by_id(self, request: Request) -> Response:
        sv = self._id(request)
        out = schema_json(sv, self.formatted(sv, request.query_params.get("format")),
                          with_subject=False)
        if _flag(request, "fetchMaxId"):
            out["maxId"] = self.service.state.max_id
        return reply(out)

    async def by_id_schema(self, request: Request) -> Response:
        sv = self._id(request)
        return Response(self.formatted(sv, request.query_params.get("format")),
                        media_type=CONTENT_TYPE)

    async def id_subjects(self, request: Request) -> Response:
        self._id(request)
        used = [sv for sv in self.service.state.id_usage(self._id_param(request),
                                                          _flag(request, "deleted"))
                if self.may(request, "DESCRIBE", SUBJECT, sv.subject)]
        return reply(sorted({sv.subject for sv in used}))

    async def id_versions(self, request: Request) -> Response:
        self._id(request)
        used = [sv for sv in self.service.state.id_usage(self._id_param(request),
                                                          _flag(request, "deleted"))
                if self.may(request, "DESCRIBE", SUBJECT, sv.subject)]
        return reply([{"subject": sv.subject, "version": sv.version} for sv in used])

    @staticmethod
    def _id_param(request: Request) -> int:
        try:
            return int(request.path_params["id"])
        except ValueError as err:
            raise e.SchemaNotFound() from err

    def _id(self, request: Request) -> SchemaValue:
        sv = self.service.by_id(self._id_param(request))
        # READ on the registry, or on a subject the id is registered under (Confluent's
        # SCHEMA_READ): a deserializer reading its topic's subject can resolve its ids
        if not self.may(request, "READ", REGISTRY) and not any(
                self.may(request, "READ", SUBJECT, used.subject)
                for used in self.service.state.id_usage(sv.id, True)):
            user = str(request.scope.get(USER, ""))
            raise e.Forbidden(str(AccessDenied(user, "READ", REGISTRY, REGISTRY_NAME)))
        return sv

    async def lookup(self, request: Request) -> Response:
        subject = _subject(request)
        req = SchemaRequest.from_json(await self.body(request))
        sv = self.service.lookup(subject, req, _flag(request, "normalize"),
                                 _flag(request, "deleted"))
        return reply(schema_json(sv))

    async def check(self, request: Request) -> Response:
        subject = _subject(request)
        check_subject(subject)
        req = SchemaRequest.from_json(await self.body(request))
        parsed = self.service.parse(req, _flag(request, "normalize"))
        raw_version = request.path_params.get("version")
        if raw_version is None:
            against = self.service.state.versions(subject)
            level = None
        else:
            version = parse_version(raw_version)
            try:
                against = [self.service.version(subject, version)]
            except e.SubjectNotFound:
                if version is not None:
                    raise
                against = []
            # a single named version is checked at the level's non-transitive form
            level = self.service.compatibility_level(subject).removesuffix("_TRANSITIVE")
        problems = self.service.compatibility_errors(subject, parsed, against, level)
        out: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            out["messages"] = problems
        return reply(out)

    async def get_config(self, request: Request) -> Response:
        subject = _subject(request, None)
        if subject is not None and subject not in self.service.state.config \
                and not _flag(request, "defaultToGlobal"):
            raise e.SubjectCompatibilityNotConfigured(subject)
        return reply({"compatibilityLevel": self.service.compatibility_level(subject)})

    async def get_mode(self, request: Request) -> Response:
        subject = _subject(request, None)
        if subject is not None and subject not in self.service.state.mode \
                and not _flag(request, "defaultToGlobal"):
            raise e.SubjectModeNotConfigured(subject)
        return reply({"mode": self.service.mode(subject)})

    # writes: the leader's

    async def register(self, request: Request) -> Response:
        subject = _subject(request)
        req = SchemaRequest.from_json(await self.body(request))
        sv = await self.service.register(subject, req, _flag(request, "normalize"))
        # only the id, as Confluent: clients cache the schema they sent under it, in the
        # form they sent (a Protobuf serializer's base64 descriptor, not our text)
        return reply({"id": sv.id})

    async def delete_subject(self, request: Request) -> Response:
        return reply(await self.service.delete_subject(_subject(request),
                                                       _flag(request, "permanent")))

    async def delete_version(self, request: Request) -> Response:
        version = parse_version(request.path_params["version"])
        return reply(await self.service.delete_version(_subject(request),
                                                       version, _flag(request, "permanent")))

    async def put_config(self, request: Request) -> Response:
        body = await self.body(request)
        level = body.get("compatibility") if isinstance(body, dict) else None
        done = await self.service.set_config(_subject(request, None), level)
        return reply({"compatibility": done})

    async def delete_config(self, request: Request) -> Response:
        previous = await self.service.delete_config(_subject(request, None))
        return reply({"compatibilityLevel": previous})

    async def put_mode(self, request: Request) -> Response:
        body = await self.body(request)
        mode = body.get("mode") if isinstance(body, dict) else None
        done = await self.service.set_mode(_subject(request, None), mode,
                                           _flag(request, "force"))
        return reply({"mode": done})

    async def delete_mode(self, request: Request) -> Response:
        return reply({"mode": await self.service.delete_mode(
            _subject(request))})

    async def forward(self, request: Request) -> Response:
        leader = await self.node.leader_url(self.service.store.timeout)
        if leader is None:
            raise e.UnknownLeader("Leader not known.")
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARD_HEADERS}
        raw = request.scope.get("raw_path") or request.url.path.encode()
        url = f"{leader}{raw.split(b'?', 1)[0].decode('latin-1')}"
        try:
            answer = await self.node.forwarder.request(
                request.method, url, params=request.query_params, headers=headers,
                content=await request.body())
        except httpx.HTTPError as err:
            raise e.ForwardingFailed(f"Error while forwarding the request to the leader "
                                     f"{leader}: {err}") from err
        return Response(answer.content, answer.status_code,
                        media_type=answer.headers.get("content-type", CONTENT_TYPE))


Handler = Callable[[Request], Awaitable[Response]]
# what a request needs: (operation, resource type, name), or None for nothing
Need = Callable[[Request], tuple[str, str, str] | None]


def on_subject(operation: str) -> Need:
    return lambda request: (operation, SUBJECT, _subject(request))


def on_config(operation: str) -> Need:
    """/config and /mode: on the subject if one is named, else on the registry."""
    def need(request: Request) -> tuple[str, str, str]:
        subject = _subject(request, None)
        return (operation, REGISTRY, REGISTRY_NAME) if subject is None \
            else (operation, SUBJECT, subject)
    return need


def create_app(node: Node) -> ASGIApp:
    api = RegistryApi(node)

    def authorize(request: Request, need: Need | None) -> None:
        # here, before a write is forwarded: a denied request never reaches the leader
        wanted = None if need is None or node.authorizer is None else need(request)
        if wanted is not None and node.authorizer is not None:
            try:
                node.authorizer.check(str(request.scope.get(USER, "")), *wanted)
            except AccessDenied as denied:
                raise e.Forbidden(str(denied)) from denied

    def read(handler: Handler, need: Need | None = None) -> Handler:
        async def run(request: Request) -> Response:
            try:
                authorize(request, need)
                return await handler(request)
            except e.RegistryError as err:
                return reply(err.body(), err.status)
        return run

    def write(handler: Handler, need: Need) -> Handler:
        async def run(request: Request) -> Response:
            try:
                authorize(request, need)
                if not node.is_leader:
                    return await api.forward(request)
                return await handler(request)
            except e.RegistryError as err:
                return reply(err.body(), err.status)
        return run

    s, v = "/subjects/{subject}", "/subjects/{subject}/versions/{version}"
    read_s, write_s, delete_s = on_subject("READ"), on_subject("WRITE"), on_subject("DELETE")
    describe_c, alter_c = on_config("DESCRIBE_CONFIGS"), on_config("ALTER_CONFIGS")
    routes = [
        Route("/", read(api.root), methods=["GET"]),
        Route("/schemas/types", read(api.schema_types), methods=["GET"]),
        # the listings filter, the id lookups check in the handler (they need the id)
        Route("/schemas", read(api.schemas), methods=["GET"]),
        Route("/schemas/ids/{id}", read(api.by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/schema", read(api.by_id_schema), methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", read(api.id_subjects), methods=["GET"]),
        Route("/schemas/ids/{id}/versions", read(api.id_versions), methods=["GET"]),
        Route("/subjects", read(api.subjects), methods=["GET"]),
        Route(s, read(api.lookup, read_s), methods=["POST"]),
        Route(s, write(api.delete_subject, delete_s), methods=["DELETE"]),
        Route(f"{s}/versions", read(api.versions, read_s), methods=["GET"]),
        Route(f"{s}/versions", write(api.register, write_s), methods=["POST"]),
        Route(v, read(api.get_version, read_s), methods=["GET"]),
        Route(v, write(api.delete_version, delete_s), methods=["DELETE"]),
        Route(f"{v}/schema", read(api.get_version_schema, read_s), methods=["GET"]),
        Route(f"{v}/referencedby", read(api.referenced_by, read_s), methods=["GET"]),
        Route("/compatibility/subjects/{subject}/versions/{version}",
              read(api.check, read_s), methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions", read(api.check, read_s),
              methods=["POST"]),
        Route("/config", read(api.get_config, describe_c), methods=["GET"]),
        Route("/config", write(api.put_config, alter_c), methods=["PUT"]),
        Route("/config", write(api.delete_config, alter_c), methods=["DELETE"]),
        Route("/config/{subject}", read(api.get_config, describe_c), methods=["GET"]),
        Route("/config/{subject}", write(api.put_config, alter_c), methods=["PUT"]),
        Route("/config/{subject}", write(api.delete_config, alter_c), methods=["DELETE"]),
        Route("/mode", read(api.get_mode, describe_c), methods=["GET"]),
        Route("/mode", write(api.put_mode, alter_c), methods=["PUT"]),
        Route("/mode/{subject}", read(api.get_mode, describe_c), methods=["GET"]),
        Route("/mode/{subject}", write(api.put_mode, alter_c), methods=["PUT"]),
        Route("/mode/{subject}", write(api.delete_mode, alter_c), methods=["DELETE"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return reply({"error_code": status, "message": "HTTP 404 Not Found" if status == 404
                      else f"HTTP {status}"}, status)

    return keep_encoded_slashes(Starlette(routes=routes, exception_handlers={
        404: not_found, 405: not_found}))
