#!/usr/bin/env node
// kafkajs driver for compat_tests/test_kafkajs.py.
//
//   node produce_consume.js <bootstrap> <topic> <mode>
//
// modes:
//   create         admin.createTopics(<topic>, 3 partitions); prints {"created": bool, "topics": [...]}
//   produce-none   reads {"sends": [[message, ...], ...]} on stdin and sends each list with one
//   produce-gzip   producer.send() (no compression / gzip); prints {"results": [[RecordMetadata...]]}
//   metadata       admin.fetchTopicMetadata + fetchTopicOffsets; prints {"metadata": ..., "offsets": ...}
//
// A message on stdin: {"partition": int, "key": str|null, "value": str|null,
// "headers": {name: str | [str, ...]}, "timestamp": str}.
//
// The result is the only thing written to stdout (one JSON line); kafkajs' own logging goes to
// stderr (COMPAT_KAFKAJS_LOG_LEVEL=DEBUG shows every request with its API version). A watchdog
// exits with status 3 if the whole run takes longer than WATCHDOG_MS.
// kafkajs' consumer needs consumer groups, which the broker does not serve yet, so reading back
// happens on the Python side.

'use strict'

const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs')

const WATCHDOG_MS = 40000

const stderrLogCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
}

function readStdin () {
  return new Promise((resolve, reject) => {
    const chunks = []
    process.stdin.on('data', chunk => chunks.push(chunk))
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    process.stdin.on('error', reject)
  })
}

function toKafkajsMessage (m) {
  const headers = {}
  for (const [name, value] of Object.entries(m.headers || {})) {
    headers[name] = Array.isArray(value) ? value.map(v => Buffer.from(v, 'utf8')) : Buffer.from(value, 'utf8')
  }
  return {
    partition: m.partition,
    key: m.key === null ? null : Buffer.from(m.key, 'utf8'),
    value: m.value === null ? null : Buffer.from(m.value, 'utf8'),
    headers,
    timestamp: m.timestamp
  }
}

async function create (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      waitForLeaders: true,
      timeout: 10000,
      topics: [{ topic, numPartitions: 3, replicationFactor: 1 }]
    })
    const topics = await admin.listTopics()
    return { created, topics }
  } finally {
    await admin.disconnect()
  }
}

async function produce (kafka, topic, codec) {
  const input = JSON.parse(await readStdin())
  const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[codec]
  if (compression === undefined) throw new Error(`unknown codec ${codec}`)
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    idempotent: false,
    createPartitioner: Partitioners.DefaultPartitioner // partitions are explicit; silences the v2 warning
  })
  await producer.connect()
  try {
    const results = []
    for (const messages of input.sends) {
      results.push(await producer.send({
        topic,
        acks: -1,
        timeout: 10000,
        compression,
        messages: messages.map(toKafkajsMessage)
      }))
    }
    return { results }
  } finally {
    await producer.disconnect()
  }
}

async function metadata (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [topic] })
    const offsets = await admin.fetchTopicOffsets(topic)
    return { metadata: meta, offsets }
  } finally {
    await admin.disconnect()
  }
}

async function main () {
  const [bootstrap, topic, mode] = process.argv.slice(2)
  if (!bootstrap || !topic || !mode) throw new Error('usage: produce_consume.js <bootstrap> <topic> <mode>')
  const kafka = new Kafka({
    clientId: 'compat-kafkajs',
    brokers: [bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: logLevel[process.env.COMPAT_KAFKAJS_LOG_LEVEL || 'WARN'] ?? logLevel.WARN,
    logCreator: stderrLogCreator
  })
  let result
  if (mode === 'create') result = await create(kafka, topic)
  else if (mode.startsWith('produce-')) result = await produce(kafka, topic, mode.slice('produce-'.length))
  else if (mode === 'metadata') result = await metadata(kafka, topic)
  else throw new Error(`unknown mode ${mode}`)
  process.stdout.write(JSON.stringify(result) + '\n')
}

const watchdog = setTimeout(() => {
  process.stderr.write(`watchdog: no result after ${WATCHDOG_MS} ms\n`)
  process.exit(3)
}, WATCHDOG_MS)

main().then(
  () => { clearTimeout(watchdog) },
  err => {
    process.stderr.write(`error: ${err && err.stack ? err.stack : err}\n`)
    if (err && err.type) process.stderr.write(`kafkajs error type: ${err.type} retriable=${err.retriable}\n`)
    process.exit(2)
  }
)
