"""A FileDescriptorProto printed as .proto source.

Confluent serves Protobuf schemas as .proto text, while confluent-kafka's serializers
register them as base64 FileDescriptorProtos: the registry converts one way with protoc
and the other way with this printer. protobuf's Python package has no printer of its own.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2 as pb

F = pb.FieldDescriptorProto
_SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}
_FILE_OPTIONS = ("java_package", "java_outer_classname", "go_package", "csharp_namespace",
                 "objc_class_prefix", "php_namespace", "ruby_package", "swift_prefix")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def field_type(field: pb.FieldDescriptorProto) -> str:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP):
        return str(field.type_name)
    return _SCALARS[field.type]


class _Printer:
    def __init__(self, fdp: pb.FileDescriptorProto) -> None:
        self.fdp = fdp
        self.lines: list[str] = []
        self.proto3 = fdp.syntax == "proto3"

    def out(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def file(self) -> str:
        f = self.fdp
        self.out(0, f'syntax = "{f.syntax or "proto2"}";')
        if f.package:
            self.out(0, f"package {f.package};")
        self.lines.append("")
        for i, dep in enumerate(f.dependency):
            public = "public " if i in f.public_dependency else ""
            self.out(0, f"import {public}{_quote(dep)};")
        for name in _FILE_OPTIONS:
            if f.options.HasField(name):
                self.out(0, f"option {name} = {_quote(getattr(f.options, name))};")
        if f.options.HasField("java_multiple_files"):
            flag = str(f.options.java_multiple_files).lower()
            self.out(0, f"option java_multiple_files = {flag};")
        self.lines.append("")
        for msg in f.message_type:
            self.message(msg, 0)
        for enum in f.enum_type:
            self.enum(enum, 0)
        for svc in f.service:
            self.out(0, f"service {svc.name} {{")
            for m in svc.method:
                cs = "stream " if m.client_streaming else ""
                ss = "stream " if m.server_streaming else ""
                self.out(1, f"rpc {m.name} ({cs}{m.input_type}) returns ({ss}{m.output_type});")
            self.out(0, "}")
        return "\n".join(self.lines).rstrip() + "\n"

    def enum(self, enum: pb.EnumDescriptorProto, depth: int) -> None:
        self.out(depth, f"enum {enum.name} {{")
        if enum.options.allow_alias:
            self.out(depth + 1, "option allow_alias = true;")
        for v in enum.value:
            self.out(depth + 1, f"{v.name} = {v.number};")
        for r in enum.reserved_range:
            self.out(depth + 1, f"reserved {self._range(r.start, r.end, inclusive=True)};")
        self.out(depth, "}")

    @staticmethod
    def _range(start: int, end: int, inclusive: bool) -> str:
        last = end if inclusive else end - 1
        if last >= 536870911 or last == 2147483647:
            return f"{start} to max"
        return str(start) if start == last else f"{start} to {last}"

    def field(self, field: pb.FieldDescriptorProto, maps: dict[str, pb.DescriptorProto],
              depth: int, in_oneof: bool) -> None:
        entry = maps.get(field.type_name.rsplit(".", 1)[-1]) if field.type_name else None
        if entry is not None and field.label == F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            head = f"map<{field_type(key)}, {field_type(value)}>"
        else:
            label = ""
            if not in_oneof:
                if field.label == F.LABEL_REPEATED:
                    label = "repeated "
                elif field.label == F.LABEL_REQUIRED:
                    label = "required "
                elif field.proto3_optional or not self.proto3:
                    label = "optional "
            head = f"{label}{field_type(field)}"
        opts = []
        if field.HasField("default_value"):
            dv = field.default_value
            text = field.type in (F.TYPE_STRING, F.TYPE_BYTES)
            opts.append(f"default = {_quote(dv) if text else dv}")
        if field.HasField("json_name") and field.json_name != _json_name(field.name):
            opts.append(f"json_name = {_quote(field.json_name)}")
        if field.options.HasField("packed"):
            opts.append(f"packed = {str(field.options.packed).lower()}")
        if field.options.deprecated:
            opts.append("deprecated = true")
        suffix = f" [{', '.join(opts)}]" if opts else ""
        self.out(depth, f"{head} {field.name} = {field.number}{suffix};")

    def message(self, msg: pb.DescriptorProto, depth: int) -> None:
        self.out(depth, f"message {msg.name} {{")
        maps = {n.name: n for n in msg.nested_type if n.options.map_entry}
        real_oneofs = {i for i, f in enumerate(msg.field)
                       if f.HasField("oneof_index") and not f.proto3_optional}
        printed_oneofs: set[int] = set()
        for i, f in enumerate(msg.field):
            if i in real_oneofs:
                idx = f.oneof_index
                if idx in printed_oneofs:
                    continue
                printed_oneofs.add(idx)
                self.out(depth + 1, f"oneof {msg.oneof_decl[idx].name} {{")
                for j, g in enumerate(msg.field):
                    if j in real_oneofs and g.oneof_index == idx:
                        self.field(g, maps, depth + 2, in_oneof=True)
                self.out(depth + 1, "}")
            else:
                self.field(f, maps, depth + 1, in_oneof=False)
        for r in msg.reserved_range:
            self.out(depth + 1, f"reserved {self._range(r.start, r.end, inclusive=False)};")
        if msg.reserved_name:
            self.out(depth + 1, f"reserved {', '.join(_quote(n) for n in msg.reserved_name)};")
        for nested in msg.nested_type:
            if not nested.options.map_entry:
                self.message(nested, depth + 1)
        for enum in msg.enum_type:
            self.enum(enum, depth + 1)
        self.out(depth, "}")


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def to_proto_text(fdp: pb.FileDescriptorProto) -> str:
    return _Printer(fdp).file()
