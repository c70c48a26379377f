// Drives KafkaJS 2.2.4 against a broker for tests/clients/test_kafkajs.py.
// Usage: node drive.js <scenario> <bootstrap> <topic> [codec]; prints one JSON line.
"use strict";

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require("kafkajs");
const lz4 = require("lz4js");
// KafkaJS ships no LZ4 codec; lz4js writes the LZ4 frame format Kafka uses.
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async (encoder) => Buffer.from(lz4.compress(encoder.buffer)),
  decompress: async (buffer) => Buffer.from(lz4.decompress(buffer)),
});
CompressionCodecs[CompressionTypes.Snappy] = require("kafkajs-snappy");

const [scenario, bootstrap, topic, codec] = process.argv.slice(2);

// ODRADEK_KAFKAJS_SECURITY: {"ssl": {"ca": path, "cert": path, "key": path},
// "sasl": {"mechanism": "scram-sha-512", "username": …, "password": …}}, all optional
function security() {
  const spec = JSON.parse(process.env.ODRADEK_KAFKAJS_SECURITY || "{}");
  const out = {};
  if (spec.ssl) {
    const fs = require("fs");
    out.ssl = Object.fromEntries(
      Object.entries(spec.ssl).map(([k, path]) => [k, k === "ca" ? [fs.readFileSync(path)] : fs.readFileSync(path)])
    );
  }
  if (spec.sasl) out.sasl = spec.sasl;
  return out;
}

const kafka = new Kafka({
  clientId: "odradek-kafkajs-test",
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
  retry: { retries: 5 },
  ...security(),
});

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
};

// Reads the whole topic with a consumer group until `count` records arrived.
async function consumeAll(groupId, count, readUncommitted = true) {
  const consumer = kafka.consumer({ groupId, readUncommitted, sessionTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(), 30000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          got.push({
            partition,
            offset: message.offset,
            key: message.key && message.key.toString(),
            value: message.value && message.value.toString(),
            headers: Object.fromEntries(
              Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString()])
            ),
          });
          if (got.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  // committed offsets as the group coordinator reports them
  await consumer.stop();
  await consumer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  await admin.disconnect();
  return { got, committed: offsets[0].partitions };
}

async function produceAndConsume() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();

  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < 30; i++) {
    messages.push({ key: `k${i}`, value: `v${i}`, headers: { source: "kafkajs" } });
  }
  const acks = await producer.send({ topic, compression: CODECS[codec], acks: -1, messages });
  await producer.disconnect();
  const { got, committed } = await consumeAll(`g-${topic}`, 30);
  return {
    partitions: meta.topics[0].partitions.length,
    acks: acks.map((a) => ({ partition: a.partition, error: a.errorCode })),
    got,
    committed,
  };
}

async function transactions() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({
    transactionalId: `tx-${topic}`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  const committed = await producer.transaction();
  await committed.send({ topic, messages: [{ value: "kept-1" }, { value: "kept-2" }] });
  await committed.commit();
  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: [{ value: "dropped" }] });
  await aborted.abort();
  const last = await producer.transaction();
  await last.send({ topic, messages: [{ value: "kept-3" }] });
  await last.commit();
  await producer.disconnect();
  const { got } = await consumeAll(`g-${topic}`, 3, false);
  return { values: got.map((m) => m.value) };
}

async function main() {
  const run = { produce: produceAndConsume, transactions }[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}`);
  process.stdout.write(JSON.stringify(await run()) + "\n");
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exit(1);
  }
);
