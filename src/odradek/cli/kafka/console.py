"""kafka-console-producer and kafka-console-consumer, with Kafka's flags and line formats.

The producer reads lines as Kafka's LineMessageReader does (`parse.key`, `key.separator`,
`null.marker`); the consumer prints as DefaultMessageFormatter does (`print.key`,
`print.timestamp`, `print.partition`, `print.offset`, `print.headers`, separators) and
ends with "Processed a total of N messages" on stderr.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any, NoReturn

from odradek.cli.kafka.client import client_conf, load_properties, message_of
from odradek.cli.kafka.jopt import (
    Parsed,
    Parser,
    check_required,
    help_or_version,
    try_parse,
    usage_and_exit,
)


def main(tool: str, argv: list[str]) -> None:
    (_produce if tool == "kafka-console-producer" else _consume)(argv)


def _properties(p: Parser, opts: Parsed, name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in opts.all(p.specs[name]):
        key, sep, value = item.partition("=")
        if not sep:
            usage_and_exit(p, f"Invalid command line properties: {item}")
        out[key] = value
    return out


def _produce(argv: list[str]) -> None:
    from confluent_kafka import KafkaException, Producer

    p = Parser()
    bootstrap = p.option("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is "
                         "specified. The server(s) to connect to.", "server to connect to")
    topic = p.option("topic", "REQUIRED: The topic id to produce messages to.", "topic")
    p.option("producer-property", "A mechanism to pass user-defined properties in the form "
             "key=value to the producer.", "producer_prop")
    config = p.option("producer.config", "Producer config properties file.", "config file")
    p.option("property", "A mechanism to pass user-defined properties in the form key=value to "
             "the message reader.", "prop")
    p.option("reader-property", "A mechanism to pass user-defined properties in the form "
             "key=value to the message reader.", "prop")
    acks = p.option("request-required-acks", "The required acks of the producer requests",
                    "request required acks")
    codec = p.option("compression-codec", "The compression codec: either 'none', 'gzip', "
                     "'snappy', 'lz4', or 'zstd'.", "compression-codec")
    sync = p.flag("sync", "If set message send requests to the brokers are synchronously, one "
                  "at a time as they arrive.")
    linger = p.option("timeout", "linger.ms: how long to wait for more records.",
                      "timeout_ms", "Long")
    shorthand = {name: p.option(name, f"The producer's {prop}.", name, "Long")
                 for name, prop in _PRODUCER_FLAGS.items()}
    reader_config = p.option("reader-config", "Config properties file for the message reader.",
                             "config file")
    line_reader = p.option("line-reader", "The class name of the class to use for reading "
                           "lines from standard in.", "reader_class")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps to read data from standard input and publish it "
                    "to Kafka.")
    check_required(p, opts, topic, bootstrap)
    if opts.has(line_reader) and "LineMessageReader" not in (opts.value(line_reader) or ""):
        usage_and_exit(p, f"odradek does not support --line-reader {opts.value(line_reader)}")
    reader = {k: v for f in opts.all(reader_config) for k, v in load_properties(f).items()}
    reader.update({**_properties(p, opts, "property"), **_properties(p, opts, "reader-property")})
    conf = client_conf(opts.value(bootstrap), opts.all(config),
                       [f"{k}={v}" for k, v in _properties(p, opts, "producer-property").items()])
    conf.setdefault("acks", opts.value(acks, "-1"))
    if opts.has(codec):
        conf["compression.type"] = opts.value(codec) or "gzip"
    conf["linger.ms"] = opts.value(linger, "1000")
    for name, spec in shorthand.items():
        if opts.has(spec):
            prop = _PRODUCER_FLAGS[name]
            number = opts.int_value(spec) or 0
            conf[prop] = number // 1024 if prop.endswith("kbytes") else number
    name = opts.value(topic) or ""
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    try:
        producer = Producer(conf)
    except KafkaException as e:
        print(message_of(e), file=sys.stderr)
        sys.exit(1)
    for number, raw in enumerate(sys.stdin, 1):
        key, value, headers = _read_line(raw.rstrip("\n"), number, reader)
        while True:
            try:
                producer.produce(name, key=key, value=value, headers=headers or None,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        if opts.has(sync):
            producer.flush()
        producer.poll(0)
    producer.flush()
    for failure in failures:
        print(f"Error when sending message to topic {name}: {failure}", file=sys.stderr)
    if failures:
        sys.exit(1)


# ConsoleProducer's flags that are client properties, as librdkafka names them
_PRODUCER_FLAGS = {
    "batch-size": "batch.num.messages", "message-send-max-retries": "retries",
    "retry-backoff-ms": "retry.backoff.ms", "request-timeout-ms": "request.timeout.ms",
    "metadata-expiry-ms": "metadata.max.age.ms", "max-block-ms": "message.timeout.ms",
    "max-memory-bytes": "queue.buffering.max.kbytes",
    "socket-buffer-size": "socket.send.buffer.bytes",
}


def _read_line(line: str, number: int, reader: dict[str, str]
               ) -> tuple[str | None, str | None, list[tuple[str, str | bytes | None]]]:
    """LineMessageReader: [headers<headers.delimiter>][key<key.separator>]value."""
    def flag(name: str) -> bool:
        return reader.get(name, "false").lower() == "true"

    null_marker = reader.get("null.marker")
    headers: list[tuple[str, str | bytes | None]] = []
    rest = line
    if flag("parse.headers"):
        delimiter = reader.get("headers.delimiter", "\t")
        if delimiter not in rest:
            if not flag("ignore.error"):
                _bad_line(f"No headers delimiter found on line number {number}: '{line}'")
        else:
            text, rest = rest.split(delimiter, 1)
            if null_marker is None or text != null_marker:
                for pair in text.split(reader.get("headers.separator", ",")):
                    k, sep, v = pair.partition(reader.get("headers.key.separator", ":"))
                    if not sep and not flag("ignore.error"):
                        _bad_line(f"No header key separator found in pair '{pair}' on line "
                                  f"number {number}")
                    headers.append((k, None if v == null_marker else v))
    key: str | None = None
    value: str | None = rest
    if flag("parse.key"):
        separator = reader.get("key.separator", "\t")
        if separator in rest:
            key, value = rest.split(separator, 1)
        elif not flag("ignore.error"):
            _bad_line(f"No key separator found on line number {number}: '{line}'")
    if null_marker is not None:
        key = None if key == null_marker else key
        value = None if value == null_marker else value
    return key, value, headers


def _bad_line(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(1)


def _consume(argv: list[str]) -> None:
    p = Parser()
    bootstrap = p.option("bootstrap-server", "REQUIRED: The server(s) to connect to.",
                         "server to connect to")
    topic = p.option("topic", "The topic to consume on.", "topic")
    include = p.option("include", "Regular expression specifying list of topics to include "
                       "for consumption.", "Java regex (String)")
    partition = p.option("partition", "The partition to consume from. Consumption starts from "
                         "the end of the partition unless '--offset' is specified.",
                         "partition", "Integer")
    offset = p.option("offset", "The offset to consume from (a non-negative number), or "
                      "'earliest' which means from beginning, or 'latest' which means from end",
                      "consume offset")
    p.option("consumer-property", "A mechanism to pass user-defined properties in the form "
             "key=value to the consumer.", "consumer_prop")
    config = p.option("consumer.config", "Consumer config properties file.", "config file")
    p.option("property", "The properties to initialize the message formatter.", "prop")
    formatter_config = p.option("formatter-config", "Config properties file to initialize the "
                                "message formatter.", "config file")
    formatter = p.option("formatter", "The name of a class to use for formatting kafka "
                         "messages for display.", "class")
    from_beginning = p.flag("from-beginning", "If the consumer does not already have an "
                            "established offset to consume from, start with the earliest "
                            "message present in the log rather than the latest message.")
    max_messages = p.option("max-messages", "The maximum number of messages to consume before "
                            "exiting.", "num_messages", "Integer")
    timeout_ms = p.option("timeout-ms", "If specified, exit if no message is available for "
                          "consumption for the specified interval.", "timeout_ms", "Long")
    skip = p.flag("skip-message-on-error", "If there is an error when processing a message, "
                  "skip it instead of halt.")
    group = p.option("group", "The consumer group id of the consumer.", "consumer group id")
    isolation = p.option("isolation-level", "Set to read_committed in order to filter out "
                         "transactional messages which are not committed.", "isolation level")
    opts = try_parse(p, argv)
    help_or_version(p, opts, "This tool helps to read data from Kafka topics and outputs it to "
                    "standard output.")
    check_required(p, opts, bootstrap)
    if sum(opts.has(s) for s in (topic, include)) != 1:
        usage_and_exit(p, "Exactly one of --include/--topic is required. ")
    if opts.has(partition) and not opts.has(topic):
        usage_and_exit(p, "The topic is required when partition is specified.")
    if opts.has(from_beginning) and opts.has(offset):
        usage_and_exit(p, "Options from-beginning and offset cannot be specified together.")
    if opts.has(offset) and not opts.has(partition):
        usage_and_exit(p, "The partition is required when offset is specified.")
    if opts.has(formatter) and "DefaultMessageFormatter" not in (opts.value(formatter) or ""):
        usage_and_exit(p, f"odradek does not support --formatter {opts.value(formatter)}")
    fmt = {k: v for f in opts.all(formatter_config) for k, v in load_properties(f).items()}
    fmt.update(_properties(p, opts, "property"))
    consumer_props = _properties(p, opts, "consumer-property")
    if opts.has(group) and "group.id" in consumer_props \
            and consumer_props["group.id"] != opts.value(group):
        usage_and_exit(p, f"The group ids provided in different places (directly using "
                       f"'--group': {opts.value(group)}, via '--consumer-property': "
                       f"{consumer_props['group.id']}) do not match.")
    conf = client_conf(opts.value(bootstrap), opts.all(config),
                       [f"{k}={v}" for k, v in consumer_props.items()])
    explicit_group = opts.value(group) or conf.get("group.id")
    conf["group.id"] = explicit_group or f"console-consumer-{uuid.uuid4().int % 100000}"
    conf.setdefault("auto.offset.reset", "earliest" if opts.has(from_beginning) else "latest")
    if explicit_group is None:
        # Kafka's: the made-up group's offsets are never read again, so never commit them
        conf.setdefault("enable.auto.commit", "false")
    if opts.has(isolation):
        conf["isolation.level"] = opts.value(isolation)
    start = _start(p, opts.value(offset)) if opts.has(offset) else \
        _start(p, "earliest") if opts.has(from_beginning) else None
    _consume_loop(conf, opts.value(topic), opts.value(include), opts.int_value(partition),
                  start, opts.int_value(max_messages), opts.int_value(timeout_ms), fmt,
                  opts.has(skip))


def _start(p: Parser, text: str | None) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if text == "earliest":
        return int(OFFSET_BEGINNING)
    if text == "latest":
        return int(OFFSET_END)
    if text is not None and text.isdigit():
        return int(text)
    usage_and_exit(p, f"Invalid value for offset '{text}'")


def _consume_loop(conf: dict[str, Any], topic: str | None, include: str | None,
                  partition: int | None, start: int | None, max_messages: int | None,
                  timeout_ms: int | None, fmt: dict[str, str], skip: bool) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(conf)
    count = 0
    try:
        if partition is not None and topic is not None:
            consumer.assign([TopicPartition(topic, partition,
                                            OFFSET_END if start is None else start)])
        else:
            consumer.subscribe([topic] if topic else [f"^{include}"])
        last = time.monotonic()
        out = sys.stdout
        while max_messages is None or count < max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 > timeout_ms:
                    print("Error processing message, terminating consumer process: "
                          "org.apache.kafka.common.errors.TimeoutException", file=sys.stderr)
                    break
                continue
            err = msg.error()
            if err is not None:
                if skip or err.code() < 0:
                    continue
                print(f"Error processing message, terminating consumer process: {err.str()}",
                      file=sys.stderr)
                break
            last = time.monotonic()
            out.write(format_record(msg, fmt))
            out.flush()
            count += 1
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)


def format_record(msg: Any, fmt: dict[str, str]) -> str:
    """DefaultMessageFormatter: timestamp, partition, offset, headers, key, value."""
    def flag(name: str, default: bool = False) -> bool:
        return fmt.get(name, str(default)).lower() == "true"

    null = fmt.get("null.literal", "null")
    sep = fmt.get("key.separator", "\t")

    def text(b: bytes | None) -> str:
        return null if b is None else b.decode("utf-8", "replace")

    parts: list[str] = []
    if flag("print.timestamp"):
        kind, ts = msg.timestamp()
        parts.append({1: f"CreateTime:{ts}", 2: f"LogAppendTime:{ts}"}.get(kind, "NO_TIMESTAMP"))
    if flag("print.partition"):
        parts.append(f"Partition:{msg.partition()}")
    if flag("print.offset"):
        parts.append(f"Offset:{msg.offset()}")
    if flag("print.headers"):
        headers = msg.headers() or []
        parts.append(fmt.get("headers.separator", ",").join(
            f"{k}{fmt.get('headers.key.separator', ':')}{text(v)}" for k, v in headers)
            if headers else "NO_HEADERS")
    if flag("print.key"):
        parts.append(text(msg.key()))
    body = sep.join(parts)
    if flag("print.value", True):
        body = body + sep + text(msg.value()) if parts else text(msg.value())
    return body + fmt.get("line.separator", "\n")
