"""`odradek schema-registry` (run a registry) and `odradek schemas ...` (use one).

The client commands speak Confluent's REST API over HTTP, so they work against any
Confluent-compatible registry; errors print Confluent's code and message and exit 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import BootstrapOption, console, fail

app = typer.Typer(no_args_is_help=True, help="Schemas in a Confluent-compatible registry")

RegistryOption = typer.Option("http://localhost:8081", "--registry-url", "-r",
                              envvar="ODRADEK_SCHEMA_REGISTRY_URL",
                              help="Schema registry URL")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
USER_INFO_ENV = "ODRADEK_SCHEMA_REGISTRY_USER_INFO"  # user:password, basic.auth.user.info


def schema_registry(
    bootstrap: str = BootstrapOption,
    listeners: str = typer.Option("http://0.0.0.0:8081", "--listeners",
                                  help="HTTP listener, http://host:port"),
    advertised_url: str | None = typer.Option(None, "--advertised-url",
                                              help="URL other instances forward writes to"),
    topic: str = typer.Option("_schemas", "--topic", help="kafkastore.topic"),
    group_id: str = typer.Option("schema-registry", "--group-id",
                                 help="schema.registry.group.id"),
    compatibility: str = typer.Option("BACKWARD", "--compatibility",
                                      help="Default compatibility level"),
    leader_eligibility: bool = typer.Option(True, "--leader-eligibility/--no-leader-eligibility"),
    basic_auth_file: Path | None = typer.Option(
        None, "--basic-auth-file",
        help="Require HTTP basic auth; users in 'user: password[,role...]' lines"),
    enable_authorization: bool = typer.Option(
        False, "--enable-authorization",
        help="Authorize requests by ACLs on subjects (Redpanda's "
             "schema_registry_enable_authorization); needs --basic-auth-file"),
    acl_topic: str | None = typer.Option(
        None, "--acl-topic", help="confluent.schema.registry.acl.topic (default: the "
                                  "topic + '_acl')"),
    super_users: str = typer.Option(
        "", "--super-users", help="super.users: 'User:name;User:other', bypass the ACLs"),
    log_level: str = typer.Option("INFO", "--log-level", envvar="ODRADEK_LOG_LEVEL"),
) -> None:
    """Run a Confluent-compatible schema registry with its state in Kafka."""
    import logging

    from odradek.registry.acls import parse_super_users
    from odradek.registry.compatibility import LEVELS
    from odradek.registry.server import RegistryConfig, serve

    if compatibility.upper() not in LEVELS:
        fail(f"--compatibility must be one of {', '.join(LEVELS)}")
    if not listeners.startswith("http://"):
        fail("--listeners must be http://host:port")
    if basic_auth_file is not None:
        from odradek.registry.auth import PasswordFileError, load_password_file

        try:
            load_password_file(basic_auth_file)
        except PasswordFileError as e:
            fail(str(e))
    if enable_authorization and basic_auth_file is None:
        fail("--enable-authorization needs --basic-auth-file: ACLs name its users")
    if (acl_topic or super_users) and not enable_authorization:
        fail("--acl-topic and --super-users need --enable-authorization")
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python narrates every connection at INFO; its warnings are enough here
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    config = RegistryConfig(bootstrap_servers=bootstrap, listeners=listeners,
                            advertised_url=advertised_url, topic=topic, group_id=group_id,
                            compatibility=compatibility.upper(),
                            leader_eligibility=leader_eligibility,
                            basic_auth_file=basic_auth_file,
                            enable_authorization=enable_authorization, acl_topic=acl_topic,
                            super_users=parse_super_users(super_users))

    async def run() -> None:
        task = asyncio.create_task(serve(config))
        loop = asyncio.get_running_loop()
        # inside @long_running, the loop's own handlers: a signal cancels serve() and its
        # finally stops the registry (leaving the group, closing the clients) cleanly
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    from confluent_kafka import KafkaException

    from odradek.registry.errors import RegistryError

    try:
        asyncio.run(run())
    except OSError as e:
        fail(str(e.strerror or e))
    except KafkaException as e:
        fail(f"cannot use the brokers at {bootstrap}: {e.args[0].str()}")
    except RegistryError as e:
        fail(f"cannot read {topic} from {bootstrap}: {e.message}")


def _request(method: str, url: str, body: Any = None,
             params: dict[str, str] | None = None) -> Any:
    import os

    import httpx

    user_info = os.environ.get(USER_INFO_ENV, "")
    user, sep, password = user_info.partition(":")
    auth = (user, password) if sep else None
    try:
        answer = httpx.request(method, url, params=params, auth=auth,
                               content=None if body is None else json.dumps(body),
                               headers={"Content-Type": CONTENT_TYPE}, timeout=30)
    except httpx.HTTPError as e:
        fail(f"cannot reach the schema registry at {url}: {e}")
    try:
        data = answer.json()
    except ValueError:
        data = answer.text
    if answer.status_code >= 400:
        if isinstance(data, dict) and "error_code" in data:
            fail(f"{data['error_code']}: {data.get('message', '')}")
        fail(f"HTTP {answer.status_code}: {data}")
    return data


def _quote(subject: str) -> str:
    from urllib.parse import quote

    return quote(subject, safe="")


@app.command("list")
def list_subjects(
    registry: str = RegistryOption,
    prefix: str = typer.Option("", "--prefix", help="Only subjects starting with this"),
    deleted: bool = typer.Option(False, "--deleted", help="Include soft-deleted subjects"),
) -> None:
    """List subjects with their latest version and id."""
    from rich.table import Table

    names = _request("GET", f"{registry}/subjects",
                     params={"subjectPrefix": prefix, "deleted": str(deleted).lower()})
    table = Table("subject", "latest version", "id", "type")
    for name in names:
        latest = _request("GET", f"{registry}/subjects/{_quote(name)}/versions/latest",
                          params={"deleted": str(deleted).lower()})
        table.add_row(name, str(latest["version"]), str(latest["id"]),
                      latest.get("schemaType", "AVRO"))
    console.print(table)


@app.command("get")
def get(
    subject: str | None = typer.Argument(None, help="Subject (or use --id)"),
    version: str = typer.Option("latest", "--version", "-v"),
    schema_id: int | None = typer.Option(None, "--id", help="Look up a schema by id"),
    registry: str = RegistryOption,
) -> None:
    """Print a subject's version, or a schema by id, as JSON."""
    if schema_id is not None:
        data = _request("GET", f"{registry}/schemas/ids/{schema_id}")
    elif subject is not None:
        data = _request("GET", f"{registry}/subjects/{_quote(subject)}/versions/{version}")
    else:
        fail("give a subject or --id")
    console.print_json(json.dumps(data))


def _schema_body(schema_file: Path, schema_type: str, references: list[str]) -> dict[str, Any]:
    try:
        text = schema_file.read_text()
    except OSError as e:
        fail(f"cannot read {schema_file}: {e}")
    if schema_type.upper() not in ("AVRO", "JSON", "PROTOBUF"):
        fail("--type must be AVRO, JSON or PROTOBUF")
    refs = []
    for ref in references:
        name, _, rest = ref.partition("=")
        subject, _, version = rest.rpartition(":")
        if not name or not subject or not version.lstrip("-").isdigit():
            fail(f"--reference {ref!r}: expected name=subject:version")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    body: dict[str, Any] = {"schema": text, "schemaType": schema_type.upper()}
    if refs:
        body["references"] = refs
    return body


SchemaTypeOption = typer.Option("AVRO", "--type", "-t", help="AVRO, JSON or PROTOBUF")
ReferenceOption = typer.Option([], "--reference",
                               help="A referenced schema: name=subject:version (repeatable)")


@app.command("register")
def register(
    subject: str = typer.Argument(...),
    schema_file: Path = typer.Argument(..., help="File holding the schema"),
    schema_type: str = SchemaTypeOption,
    reference: list[str] = ReferenceOption,
    normalize: bool = typer.Option(False, "--normalize"),
    registry: str = RegistryOption,
) -> None:
    """Register a schema under a subject; prints its id and version."""
    body = _schema_body(schema_file, schema_type, reference)
    data = _request("POST", f"{registry}/subjects/{_quote(subject)}/versions", body,
                    params={"normalize": str(normalize).lower()})
    version = data.get("version")
    if version is None:
        found = _request("POST", f"{registry}/subjects/{_quote(subject)}", body)
        version = found.get("version")
    console.print(f"id {data['id']} version {version}", highlight=False)


@app.command("check")
def check(
    subject: str = typer.Argument(...),
    schema_file: Path = typer.Argument(...),
    schema_type: str = SchemaTypeOption,
    reference: list[str] = ReferenceOption,
    version: str = typer.Option("latest", "--version", "-v"),
    registry: str = RegistryOption,
) -> None:
    """Check a schema against a subject's version; exit 1 if incompatible."""
    body = _schema_body(schema_file, schema_type, reference)
    data = _request("POST", f"{registry}/compatibility/subjects/{_quote(subject)}/versions/"
                    f"{version}", body, params={"verbose": "true"})
    if data.get("is_compatible"):
        console.print("compatible")
        return
    for message in data.get("messages", []):
        console.print(message, highlight=False)
    fail("incompatible")


@app.command("delete")
def delete(
    subject: str = typer.Argument(...),
    version: str | None = typer.Option(None, "--version", "-v",
                                       help="Delete only this version"),
    permanent: bool = typer.Option(False, "--permanent",
                                   help="Hard delete (after a soft delete)"),
    registry: str = RegistryOption,
) -> None:
    """Soft-delete a subject (or one version); --permanent deletes for good."""
    path = f"{registry}/subjects/{_quote(subject)}"
    if version is not None:
        path += f"/versions/{version}"
    data = _request("DELETE", path, params={"permanent": str(permanent).lower()})
    console.print(f"deleted versions {data}" if isinstance(data, list)
                  else f"deleted version {data}", highlight=False)


acl_app = typer.Typer(no_args_is_help=True,
                      help="ACLs on subjects and the registry (kept in <topic>_acl)")
app.add_typer(acl_app, name="acl")
AclTopicOption = typer.Option("_schemas", "--topic",
                              help="The registry's kafkastore.topic; ACLs go to <topic>_acl")


def _bindings(principal: str, operations: list[str], subject: str | None,
              registry_global: bool, prefixed: bool, deny: bool) -> list[Any]:
    from odradek.registry.acls import REGISTRY, REGISTRY_NAME, SUBJECT, RegistryAcl

    if (subject is None) == (not registry_global):
        fail("give exactly one of --subject and --registry-global")
    if prefixed and subject is None:
        fail("--prefixed applies to --subject")
    if not operations:
        fail("give at least one --operation")
    try:
        return [RegistryAcl(principal, SUBJECT if subject is not None else REGISTRY,
                            subject if subject is not None else REGISTRY_NAME,
                            op.upper().replace("-", "_"), "DENY" if deny else "ALLOW",
                            "PREFIXED" if prefixed else "LITERAL") for op in operations]
    except ValueError as e:
        fail(str(e))


def _acl_store_run(bootstrap: str, topic: str, acl_topic: str | None,
                   records: list[tuple[bytes, bytes | None]]) -> Any:
    """Read the ACL topic (after appending `records`); the ACLs present then."""
    from confluent_kafka import KafkaException

    from odradek.registry import acls
    from odradek.registry.errors import RegistryError
    from odradek.registry.store import KafkaStore

    async def run() -> set[acls.RegistryAcl]:
        store = KafkaStore(bootstrap, acl_topic or f"{topic}_acl", state=acls.AclState(),
                           decode=acls.decode)
        try:
            await store.start()
            if records:
                await store.write(records)
            found: set[acls.RegistryAcl] = store.state.acls
            return found
        finally:
            await store.stop()

    try:
        return asyncio.run(run())
    except KafkaException as e:
        fail(f"cannot use the brokers at {bootstrap}: {e.args[0].str()}")
    except RegistryError as e:
        fail(e.message)


PrincipalOption = typer.Option(..., "--principal", help="User:name (User:* for everyone)")
OperationOption = typer.Option([], "--operation", "-o",
                               help="read, write, delete, describe, describe_configs, "
                                    "alter_configs or all (repeatable)")
SubjectOption = typer.Option(None, "--subject", help="A subject (or * for all of them)")
GlobalOption = typer.Option(False, "--registry-global",
                            help="The registry itself: global /config, /mode, schema ids")
PrefixedOption = typer.Option(False, "--prefixed", help="--subject is a prefix")
DenyOption = typer.Option(False, "--deny", help="A DENY ACL (wins over any ALLOW)")
AclTopicNameOption = typer.Option(None, "--acl-topic", help="When not <topic>_acl")


@acl_app.command("add")
def acl_add(principal: str = PrincipalOption, operation: list[str] = OperationOption,
            subject: str | None = SubjectOption, registry_global: bool = GlobalOption,
            prefixed: bool = PrefixedOption, deny: bool = DenyOption,
            bootstrap: str = BootstrapOption, topic: str = AclTopicOption,
            acl_topic: str | None = AclTopicNameOption) -> None:
    """Add ACLs; every registry instance on these brokers applies them within moments."""
    added = _bindings(principal, operation, subject, registry_global, prefixed, deny)
    _acl_store_run(bootstrap, topic, acl_topic, [(b.key(), b"{}") for b in added])
    for b in added:
        console.print(f"added: {b}", highlight=False)


@acl_app.command("remove")
def acl_remove(principal: str = PrincipalOption, operation: list[str] = OperationOption,
               subject: str | None = SubjectOption, registry_global: bool = GlobalOption,
               prefixed: bool = PrefixedOption, deny: bool = DenyOption,
               bootstrap: str = BootstrapOption, topic: str = AclTopicOption,
               acl_topic: str | None = AclTopicNameOption) -> None:
    """Remove ACLs (the exact bindings `add` made)."""
    gone = _bindings(principal, operation, subject, registry_global, prefixed, deny)
    _acl_store_run(bootstrap, topic, acl_topic, [(b.key(), None) for b in gone])
    for b in gone:
        console.print(f"removed: {b}", highlight=False)


@acl_app.command("list")
def acl_list(principal: str | None = typer.Option(None, "--principal"),
             bootstrap: str = BootstrapOption, topic: str = AclTopicOption,
             acl_topic: str | None = AclTopicNameOption) -> None:
    """List the registry's ACLs."""
    from rich.table import Table

    table = Table("principal", "permission", "operation", "resource", "name", "pattern")
    found = _acl_store_run(bootstrap, topic, acl_topic, [])
    for b in sorted(found, key=lambda b: (b.principal, b.resource_type, b.name, b.operation)):
        if principal is None or b.principal == principal:
            table.add_row(b.principal, b.permission, b.operation, b.resource_type, b.name,
                          b.pattern_type)
    console.print(table)
