"""Protobuf schemas as FileDescriptorProtos.

A schema arrives as .proto text (Confluent's REST API, the CLI) or as a base64 serialized
FileDescriptorProto (confluent-kafka's ProtobufSerializer). Text is compiled by protoc
(grpcio-tools ships it) with the references handed in as a descriptor set; both forms end
as one descriptor, printed back as text for storage, so either spelling of a schema gets
the same id. Compatibility follows Confluent's Protobuf rules (its SchemaDiff names).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2 as pb
from google.protobuf.message import DecodeError

from odradek.registry.errors import InvalidSchema
from odradek.registry.formats.base import ParsedSchema, ResolvedReference
from odradek.registry.formats.proto_text import field_type, to_proto_text

F = pb.FieldDescriptorProto
_BASE64 = re.compile(r"^[A-Za-z0-9+/\r\n]+=*\s*$")
_WELL_KNOWN = Path(grpc_tools.__file__).parent / "_proto"
MAIN_FILE = "schema.proto"
# scalar kinds a reader may swap for each other and still read the bytes (Confluent's table)
_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_STRING, F.TYPE_BYTES},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
]


def _decode_descriptor(text: str) -> pb.FileDescriptorProto | None:
    if not _BASE64.match(text):
        return None
    try:
        raw = base64.b64decode(text, validate=False)
        fdp = pb.FileDescriptorProto.FromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp if fdp.message_type or fdp.enum_type or fdp.package or fdp.syntax else None


def _ref_descriptors(refs: tuple[ResolvedReference, ...],
                     out: dict[str, pb.FileDescriptorProto]) -> None:
    for ref in refs:
        if ref.name in out:
            continue
        _ref_descriptors(ref.references, out)
        fdp = pb.FileDescriptorProto()
        fdp.CopyFrom(ProtobufSchema(ref.schema, ref.references, file_name=ref.name).descriptor)
        fdp.name = ref.name
        out[ref.name] = fdp


@functools.lru_cache(maxsize=1024)
def _compile(text: str, deps: bytes, file_name: str) -> bytes:
    """protoc's descriptor of `text`; deps is a serialized FileDescriptorSet."""
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as tmp:
        src = Path(tmp, "src")
        (src / file_name).parent.mkdir(parents=True, exist_ok=True)
        (src / file_name).write_text(text)
        out = Path(tmp, "out.pb")
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{src}", f"-I{_WELL_KNOWN}",
               f"--descriptor_set_out={out}"]
        if deps:
            Path(tmp, "deps.pb").write_bytes(deps)
            cmd.append(f"--descriptor_set_in={Path(tmp, 'deps.pb')}")
        cmd.append(file_name)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"), check=False)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().replace(str(src) + "/", "")
            raise InvalidSchema(f"Invalid schema {text}, details: {detail}")
        files = pb.FileDescriptorSet.FromString(out.read_bytes()).file
        return bytes(files[-1].SerializeToString())


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, text: str, refs: tuple[ResolvedReference, ...] = (),
                 file_name: str = MAIN_FILE) -> None:
        self._refs = refs
        fdp = _decode_descriptor(text.strip())
        if fdp is None:
            deps: dict[str, pb.FileDescriptorProto] = {}
            _ref_descriptors(refs, deps)
            dep_set = pb.FileDescriptorSet(file=list(deps.values()))
            raw = _compile(text, dep_set.SerializeToString() if deps else b"", file_name)
            fdp = pb.FileDescriptorProto.FromString(raw)
        else:
            imported = {r.name for r in refs}
            missing = [d for d in fdp.dependency
                       if d not in imported and not (_WELL_KNOWN / d).exists()]
            if missing:
                raise InvalidSchema(f"Invalid schema {text}, details: imports "
                                    f"{', '.join(missing)} without a reference")
        self.descriptor = fdp

    def canonical(self) -> str:
        return to_proto_text(self.descriptor)

    def normalized(self) -> ProtobufSchema:
        return self

    def formatted(self, fmt: str | None) -> str:
        if fmt == "serialized":
            fdp = pb.FileDescriptorProto()
            fdp.CopyFrom(self.descriptor)
            fdp.ClearField("name")
            return base64.b64encode(fdp.SerializeToString()).decode("ascii")
        return self.canonical()

    def reader_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"Incompatible schema type {writer.schema_type}"]
        return _diff(writer.descriptor, self.descriptor)


def _messages(fdp: pb.FileDescriptorProto) -> dict[str, pb.DescriptorProto]:
    found: dict[str, pb.DescriptorProto] = {}

    def walk(prefix: str, msgs: list[pb.DescriptorProto]) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}"
            found[name] = m
            walk(name, list(m.nested_type))

    walk(f".{fdp.package}" if fdp.package else "", list(fdp.message_type))
    return found


def _kind(f: pb.FieldDescriptorProto) -> str:
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return "message"
    return "enum" if f.type == F.TYPE_ENUM else "scalar"


def _diff(original: pb.FileDescriptorProto, update: pb.FileDescriptorProto) -> list[str]:
    """Confluent's incompatible Protobuf differences from `original` (writer) to `update`."""
    errors: list[str] = []

    def add(kind: str, where: str) -> None:
        errors.append(f"{{errorType:'{kind}', description:'at {where}'}}")

    if original.package != update.package:
        add("PACKAGE_CHANGED", "#/")
    old_msgs, new_msgs = _messages(original), _messages(update)
    for name, old in old_msgs.items():
        if old.options.map_entry:
            continue
        new = new_msgs.get(name)
        if new is None:
            add("MESSAGE_REMOVED", name)
            continue
        old_fields = {f.number: f for f in old.field}
        new_fields = {f.number: f for f in new.field}
        for number, of in old_fields.items():
            nf = new_fields.get(number)
            where = f"{name}/{number}"
            if nf is None:
                if of.label == F.LABEL_REQUIRED:
                    add("REQUIRED_FIELD_REMOVED", where)
                continue
            if _kind(of) != _kind(nf):
                if not any(of.type in g and nf.type in g for g in _GROUPS):
                    add("FIELD_KIND_CHANGED", where)
            elif _kind(of) == "scalar" and of.type != nf.type:
                if not any(of.type in g and nf.type in g for g in _GROUPS):
                    add("FIELD_SCALAR_KIND_CHANGED", where)
            elif _kind(of) != "scalar" and field_type(of) != field_type(nf):
                add("FIELD_NAMED_TYPE_CHANGED", where)
            if (of.label == F.LABEL_REPEATED) != (nf.label == F.LABEL_REPEATED) \
                    and _kind(of) != "scalar":
                add("FIELD_LABEL_CHANGED", where)
            if (of.label == F.LABEL_REQUIRED) != (nf.label == F.LABEL_REQUIRED):
                add("REQUIRED_FIELD_ADDED" if nf.label == F.LABEL_REQUIRED
                    else "REQUIRED_FIELD_REMOVED", where)
        for number, nf in new_fields.items():
            if number not in old_fields and nf.label == F.LABEL_REQUIRED:
                add("REQUIRED_FIELD_ADDED", f"{name}/{number}")
        _oneof_changes(old, new, old_fields, new_fields, name, add)
    return errors


def _oneof_changes(old: pb.DescriptorProto, new: pb.DescriptorProto,
                   old_fields: dict[int, pb.FieldDescriptorProto],
                   new_fields: dict[int, pb.FieldDescriptorProto], name: str,
                   report: Callable[[str, str], None]) -> None:
    def oneof_of(msg: pb.DescriptorProto, f: pb.FieldDescriptorProto) -> str | None:
        if f.HasField("oneof_index") and not f.proto3_optional:
            return str(msg.oneof_decl[f.oneof_index].name)
        return None

    old_oneofs = {oneof_of(old, f) for f in old.field} - {None}
    moved: dict[str, int] = {}
    for number, nf in new_fields.items():
        target = oneof_of(new, nf)
        of = old_fields.get(number)
        if target is None or of is None or oneof_of(old, of) == target:
            continue
        if target in old_oneofs:
            report("FIELD_MOVED_TO_EXISTING_ONEOF", f"{name}/{number}")
        else:
            moved[target] = moved.get(target, 0) + 1
    for oneof, count in moved.items():
        if count > 1:
            report("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{name}/{oneof}")
