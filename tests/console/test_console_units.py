"""The console's pure parts: form parsing, value decoding, masking, chart history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.console.admin import ConsoleError
from odradek.console.browse import SHOW_BYTES, BrowseQuery, parse_headers, show
from odradek.console.groups import ResetRequest
from odradek.console.sampler import History
from odradek.console.settings import MASK, ConsoleSettings, shown


def test_browse_query_reads_the_form_and_names_the_bad_field() -> None:
    q = BrowseQuery.parse("t", {"partition": "2", "offset": "10", "limit": "9999",
                                "timestamp": "2026-11-25T10:00:00Z", "key": "dev"})
    assert (q.partition, q.offset, q.limit, q.key) == (2, 10, 500, "dev")
    assert q.timestamp_ms == 1795600800000
    for params, message in [({"offset": "x"}, "offset must be a whole number"),
                            ({"partition": "-1"}, "partition must be at least 0"),
                            ({"timestamp": "noon"}, "timestamp must be"),
                            ({"format": "xml"}, "format must be one of")]:
        with pytest.raises(ConsoleError, match=message):
            BrowseQuery.parse("t", params)


def test_values_are_shown_as_json_text_or_hex_and_huge_ones_are_cut() -> None:
    assert json.loads(show(b'{"a": 1}', "auto").text) == {"a": 1}
    assert show(b"plain", "auto").kind == "text"
    binary = show(b"\xff\x00", "auto")
    assert (binary.kind, binary.text, binary.note) == ("hex", "ff 00", "not valid UTF-8")
    huge = show(b"a" * (SHOW_BYTES + 10), "text")
    assert len(huge.text) == SHOW_BYTES and huge.note.startswith("cut: 10 more bytes")
    assert show(b"{", "json").note == "not valid JSON"
    assert show(None, "auto").kind == "null"


def test_headers_and_reset_forms_refuse_malformed_input() -> None:
    assert parse_headers("a=1\n\nb=x=y") == [("a", "1"), ("b", "x=y")]
    with pytest.raises(ConsoleError, match="name=value"):
        parse_headers("novalue")
    assert ResetRequest.parse({"strategy": "shift", "value": "-5"}).value == "-5"
    with pytest.raises(ConsoleError, match="whole number"):
        ResetRequest.parse({"strategy": "offset", "value": "ten"})
    with pytest.raises(ConsoleError, match="choose how"):
        ResetRequest.parse({"strategy": "sideways"})


def test_secrets_are_never_shown() -> None:
    assert shown("ssl.keystore.password", "hunter2") == MASK
    assert shown("sasl.jaas.config", "user=x password=y") == MASK
    assert shown("listener.name.x.some.secret", "s") == MASK
    assert shown("anything", "v", sensitive=True) == MASK
    assert shown("retention.ms", "1000") == "1000"
    conf = ConsoleSettings("b:1", {"sasl.password": "p"}).kafka_config()
    assert conf["sasl.password"] == "p" and conf["bootstrap.servers"] == "b:1"


def test_history_keeps_only_its_span_and_forgets_gone_series() -> None:
    h = History(span_s=10)
    for t in range(30):
        h.add("lag.g1", float(t), t)
    h.add("lag.g2", 29.0, 1)
    assert [t for t, _ in h.get("lag.g1")] == [float(t) for t in range(19, 30)]
    h.forget({"lag.g1"}, "lag.")
    assert h.names("lag.") == ["lag.g1"]


@pytest.mark.parametrize("args, message", [
    (["--command-config", "/nonexistent/client.properties"], "cannot read --command-config"),
    (["--port", "0"], "--port must be between 1 and 65535"),
    (["--refresh", "0"], "--refresh must be positive"),
])
def test_console_command_refuses_bad_options_in_one_line(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from odradek.cli.main import app

    result = CliRunner().invoke(app, ["console", *args])
    assert result.exit_code == 1
    assert message in result.output


def test_avro_values_decode_with_the_pasted_schema_and_bad_ones_say_why() -> None:
    import io
    import struct

    from fastavro import parse_schema, schemaless_writer

    from odradek.console.browse import _avro_decoder

    schema = {"type": "record", "name": "Reading",
              "fields": [{"name": "device", "type": "string"},
                         {"name": "celsius", "type": "double"}]}
    body = io.BytesIO()
    schemaless_writer(body, parse_schema(schema), {"device": "th-1", "celsius": 21.5})
    framed = b"\x00" + struct.pack(">i", 7) + body.getvalue()  # Confluent's wire format
    decoder = _avro_decoder(json.dumps(schema))
    shown_value = show(framed, "avro", decoder)
    assert shown_value.kind == "avro"
    assert json.loads(shown_value.text) == {"device": "th-1", "celsius": 21.5}
    bare = show(body.getvalue(), "avro", decoder)  # no framing: read as a bare body
    assert json.loads(bare.text)["device"] == "th-1"
    garbage = show(b"\x00\x00\x00\x00\x07\xff", "avro", decoder)
    assert garbage.kind == "hex" and "not an Avro record" in garbage.note
    with pytest.raises(ConsoleError, match="Avro schema is not valid"):
        _avro_decoder('{"type": "record"}')
    with pytest.raises(ConsoleError, match="writer's schema"):
        _avro_decoder("")


def test_a_command_config_librdkafka_refuses_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from odradek.cli.main import app

    props = tmp_path / "client.properties"
    props.write_text("# a typo\nsecurity.protocoll=SASL_SSL\n")
    result = CliRunner().invoke(app, ["console", "--command-config", str(props),
                                      "--port", "1"])
    assert result.exit_code == 1
    assert "the client config is not valid" in result.output
    assert "security.protocoll" in result.output
