#!/usr/bin/env node
// kafkajs driver for the compatibility matrix (compat_tests/matrix/clients/kafkajs.py).
//
//   node matrix.js < request.json
//
// The request is one JSON object: {"mode": ..., "bootstrap": "host:port", "timeoutMs": N, ...}.
// The answer is one JSON line on stdout; kafkajs' own logging goes to stderr. The Python side
// makes every assertion: this script only drives kafkajs and reports what it saw.
//
// Records travel as {"partition", "key", "value", "headers": [[name, value], ...], "timestamp",
// "offset"}, with keys, values and header values base64-encoded (null stays null).
//
// modes: apiversions, metadata, produce, read, txn, fence, rebalance, commit, send-offsets,
// committed, admin-topics, admin-configs, offsets-by-time.

'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, ConfigResourceTypes, Partitioners, logLevel } = require('kafkajs')

const debugLines = []

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log
  if (level === logLevel.DEBUG) {
    debugLines.push({ message, extra })
    return
  }
  process.stderr.write(`[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
}

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = text => (text === null || text === undefined ? null : Buffer.from(text, 'base64'))
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function toMessage (r) {
  const headers = {}
  for (const [name, value] of r.headers || []) {
    const v = unb64(value)
    if (!(name in headers)) headers[name] = v
    else if (Array.isArray(headers[name])) headers[name].push(v)
    else headers[name] = [headers[name], v]
  }
  const message = { partition: r.partition, key: unb64(r.key), value: unb64(r.value), headers }
  if (r.timestamp !== null && r.timestamp !== undefined) message.timestamp = r.timestamp
  return message
}

function fromMessage (partition, message) {
  const headers = []
  for (const [name, value] of Object.entries(message.headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) headers.push([name, b64(v)])
  }
  return {
    partition,
    key: b64(message.key),
    value: b64(message.value),
    headers,
    timestamp: message.timestamp,
    offset: message.offset
  }
}

async function waitFor (what, deadline, check) {
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

class Reader {
  // A consumer-group member that collects every record it is given, and its latest assignment.
  constructor (kafka, { groupId, topic, readCommitted = true }) {
    this.topic = topic
    this.records = []
    this.assigned = null
    this.consumer = kafka.consumer({
      groupId,
      readUncommitted: !readCommitted,
      maxWaitTimeInMs: 100,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 300,
      retry: { retries: 2 }
    })
    this.consumer.on(this.consumer.events.GROUP_JOIN, event => {
      this.assigned = (event.payload.memberAssignment[topic] || []).slice().sort((x, y) => x - y)
    })
    this.consumer.on(this.consumer.events.CRASH, event => {
      this.crash = event.payload.error
    })
  }

  async start () {
    await this.consumer.connect()
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true })
    await this.consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => { this.records.push(fromMessage(partition, message)) }
    })
  }

  check () {
    if (this.crash) throw this.crash
  }

  async stop () {
    await this.consumer.disconnect()
  }
}

async function collect (reader, { count, partitions, deadline, settleMs = 0 }) {
  const mine = () => reader.records.filter(r => partitions.includes(r.partition))
  await waitFor(`${count} records`, deadline, () => { reader.check(); return mine().length >= count })
  if (settleMs) await sleep(settleMs)
  return mine()
}

async function withAdmin (kafka, body) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await body(admin)
  } finally {
    await admin.disconnect()
  }
}

const modes = {
  async apiversions (kafka) {
    await withAdmin(kafka, async admin => admin.describeCluster())
    const answer = debugLines.find(line => line.message.startsWith('Response ApiVersions'))
    if (!answer) throw new Error('no ApiVersions response in the debug log')
    return { versions: answer.extra.data.apiVersions.map(v => [v.apiKey, v.minVersion, v.maxVersion]) }
  },

  async metadata (kafka, req) {
    return withAdmin(kafka, async admin => ({
      cluster: await admin.describeCluster(),
      metadata: await admin.fetchTopicMetadata({ topics: [req.topic] })
    }))
  },

  async produce (kafka, req) {
    const compression = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }[req.codec]
    if (compression === undefined) throw new Error(`codec ${req.codec} is not in kafkajs core`)
    const producer = kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: req.idempotent,
      maxInFlightRequests: req.idempotent ? 1 : undefined,
      createPartitioner: Partitioners.DefaultPartitioner
    })
    await producer.connect()
    try {
      const results = await producer.send({
        topic: req.topic, acks: req.acks, timeout: 10000, compression, messages: req.records.map(toMessage)
      })
      return { results }
    } finally {
      await producer.disconnect()
    }
  },

  async read (kafka, req) {
    const reader = new Reader(kafka, { groupId: req.groupId, topic: req.topic, readCommitted: req.readCommitted })
    await reader.start()
    try {
      const records = await collect(reader, {
        count: req.count, partitions: req.partitions, deadline: Date.now() + req.waitMs, settleMs: req.settleMs
      })
      return { records }
    } finally {
      await reader.stop()
    }
  },

  async txn (kafka, req) {
    const producer = transactional(kafka, req.transactionalId)
    await producer.connect()
    try {
      for (const { records, end } of req.transactions) {
        const transaction = await producer.transaction()
        await transaction.send({ topic: req.topic, messages: records.map(toMessage) })
        if (end === 'commit') await transaction.commit()
        else await transaction.abort()
      }
      return {}
    } finally {
      await producer.disconnect()
    }
  },

  async fence (kafka, req) {
    const zombie = transactional(kafka, req.transactionalId)
    await zombie.connect()
    try {
      const open = await zombie.transaction()
      await open.send({ topic: req.topic, messages: [{ partition: 0, value: 'zombie' }] })
      await modes.txn(kafka, {
        topic: req.topic,
        transactionalId: req.transactionalId,
        transactions: [{ records: [{ partition: 0, key: null, value: b64('winner'), headers: [] }], end: 'commit' }]
      })
      try {
        await open.send({ topic: req.topic, messages: [{ partition: 0, value: 'zombie-2' }] })
        await open.commit()
      } catch (e) {
        return { error: `${e.name}: ${e.message}` }
      }
      throw new Error('the fenced producer committed')
    } finally {
      await zombie.disconnect()
    }
  },

  async rebalance (kafka, req) {
    const deadline = Date.now() + req.waitMs
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    const a = new Reader(kafka, { groupId: req.groupId, topic: req.topic })
    const b = new Reader(kafka, { groupId: req.groupId, topic: req.topic })
    const seen = (...readers) => new Set(readers.flatMap(r => r.records.map(rec => rec.value)))
    try {
      await producer.send({ topic: req.topic, acks: -1, messages: req.phase1.map(toMessage) })
      await a.start()
      await waitFor('member A to read the first records', deadline, () => {
        a.check()
        const values = seen(a)
        return req.phase1.every(r => values.has(r.value))
      })
      const aFirst = a.assigned
      await b.start()
      await waitFor('the rebalance to give B partitions', deadline, () => {
        a.check(); b.check()
        if (!a.assigned || !b.assigned || !a.assigned.length || !b.assigned.length) return false
        const all = new Set([...a.assigned, ...b.assigned])
        return all.size === 3 && a.assigned.length + b.assigned.length === 3
      })
      const after = { a: a.assigned, b: b.assigned }
      await producer.send({ topic: req.topic, acks: -1, messages: req.phase2.map(toMessage) })
      await waitFor('the later records', deadline, () => {
        const values = seen(a, b)
        return req.phase2.every(r => values.has(r.value))
      })
      await sleep(300)
      return { a_first: aFirst, a_after: after.a, b_after: after.b, a_records: a.records, b_records: b.records }
    } finally {
      await Promise.all([a.stop(), b.stop(), producer.disconnect()])
    }
  },

  async commit (kafka, req) {
    const deadline = Date.now() + req.waitMs
    const first = new Reader(kafka, { groupId: req.groupId, topic: req.topic })
    await first.start()
    let consumed
    try {
      consumed = (await collect(first, { count: 4, partitions: [0], deadline })).slice(0, 4)
      await first.consumer.commitOffsets([{ topic: req.topic, partition: 0, offset: '4', metadata: 'matrix' }])
    } finally {
      await first.stop()
    }
    const committed = await modes.committed(kafka, req)
    const second = new Reader(kafka, { groupId: req.groupId, topic: req.topic })
    await second.start()
    try {
      const resumed = await collect(second, { count: 6, partitions: [0], deadline, settleMs: 200 })
      return { consumed, committed: committed.offsets, resumed }
    } finally {
      await second.stop()
    }
  },

  async committed (kafka, req) {
    return withAdmin(kafka, async admin => {
      const [topic] = await admin.fetchOffsets({ groupId: req.groupId, topics: [req.topic] })
      return { offsets: topic.partitions.map(p => [p.partition, p.offset, p.metadata]) }
    })
  },

  async 'send-offsets' (kafka, req) {
    const reader = new Reader(kafka, { groupId: req.groupId, topic: req.inTopic })
    await reader.start()
    let input
    try {
      input = (await collect(reader, { count: 5, partitions: [0], deadline: Date.now() + req.waitMs })).slice(0, 5)
    } finally {
      await reader.stop()
    }
    const producer = transactional(kafka, req.transactionalId)
    await producer.connect()
    try {
      const transaction = await producer.transaction()
      await transaction.send({
        topic: req.outTopic,
        messages: input.map(r => ({ partition: 0, key: unb64(r.key), value: Buffer.concat([Buffer.from('out-'), unb64(r.value)]) }))
      })
      await transaction.sendOffsets({
        consumerGroupId: req.groupId,
        topics: [{ topic: req.inTopic, partitions: [{ partition: 0, offset: '5' }] }]
      })
      await transaction.commit()
      return {}
    } finally {
      await producer.disconnect()
    }
  },

  async 'admin-topics' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const created = await admin.createTopics({
        waitForLeaders: true,
        timeout: 10000,
        topics: [{ topic: req.name, numPartitions: 2, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }]
      })
      if (!created) throw new Error('createTopics answered false (topic existed)')
      const listed = (await admin.listTopics()).includes(req.name)
      const { topics: [described] } = await admin.fetchTopicMetadata({ topics: [req.name] })
      const configs = await describeConfigs(admin, req.name)
      await admin.deleteTopics({ topics: [req.name], timeout: 10000 })
      const deadline = Date.now() + req.waitMs
      let still = true
      while (still && Date.now() < deadline) {
        still = (await admin.listTopics()).includes(req.name)
        if (still) await sleep(100)
      }
      return {
        listed_after_create: listed,
        partitions: described.partitions.map(p => p.partitionId),
        retention: configs['retention.ms'] === undefined ? null : configs['retention.ms'],
        listed_after_delete: still
      }
    })
  },

  async 'admin-configs' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const before = await describeConfigs(admin, req.topic)
      await admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: req.topic, configEntries: [{ name: 'retention.ms', value: '7200000' }] }]
      })
      return { before, after: await describeConfigs(admin, req.topic) }
    })
  },

  async 'broker-ids' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const { brokers } = await admin.describeCluster()
      return { brokers: brokers.map(b => b.nodeId) }
    })
  },

  async 'assign-replicas' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const created = await admin.createTopics({
        waitForLeaders: true,
        timeout: 10000,
        topics: [{ topic: req.name, replicaAssignment: req.created.map((replicas, partition) => ({ partition, replicas })) }]
      })
      if (!created) throw new Error('createTopics answered false (topic existed)')
      await admin.createPartitions({
        timeout: 10000,
        topicPartitions: [{ topic: req.name, count: req.created.length + req.added.length, assignments: req.added }]
      })
      const { topics: [described] } = await admin.fetchTopicMetadata({ topics: [req.name] })
      const partitions = [...described.partitions].sort((a, b) => a.partitionId - b.partitionId)
      return { described: partitions.map(p => [p.leader, p.replicas]) }
    })
  },

  async 'config-sources' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const { resources: [resource] } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: req.topic }]
      })
      if (resource.errorCode) throw new Error(`describeConfigs: error ${resource.errorCode} ${resource.errorMessage}`)
      return { sources: resource.configEntries.map(e => [e.configName, e.configValue, e.configSource]) }
    })
  },

  async 'offsets-by-time' (kafka, req) {
    return withAdmin(kafka, async admin => {
      const high = await admin.fetchTopicOffsets(req.topic)
      const out = []
      for (const ts of req.timestamps) {
        const found = await admin.fetchTopicOffsetsByTimestamp(req.topic, ts)
        out.push([ts, found.find(p => p.partition === req.partition).offset])
      }
      return { offsets: out, high: high.find(p => p.partition === req.partition).high }
    })
  }
}

function transactional (kafka, transactionalId) {
  return kafka.producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 60000,
    createPartitioner: Partitioners.DefaultPartitioner
  })
}

async function describeConfigs (admin, topic) {
  const { resources: [resource] } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }]
  })
  if (resource.errorCode) throw new Error(`describeConfigs: error ${resource.errorCode} ${resource.errorMessage}`)
  return Object.fromEntries(resource.configEntries.map(e => [e.configName, e.configValue]))
}

function readStdin () {
  return new Promise((resolve, reject) => {
    const chunks = []
    process.stdin.on('data', chunk => chunks.push(chunk))
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    process.stdin.on('error', reject)
  })
}

// The cell's security properties (librdkafka's spelling) as kafkajs's ssl and sasl options.
function securityOptions (security) {
  const protocol = (security || {})['security.protocol'] || 'PLAINTEXT'
  const options = {}
  if (protocol.includes('SSL')) {
    options.ssl = { ca: [fs.readFileSync(security['ssl.ca.location'], 'utf8')] }
    if (security['ssl.certificate.location']) {
      options.ssl.cert = fs.readFileSync(security['ssl.certificate.location'], 'utf8')
      options.ssl.key = fs.readFileSync(security['ssl.key.location'], 'utf8')
    }
  }
  if (protocol.startsWith('SASL')) {
    options.sasl = {
      mechanism: security['sasl.mechanism'].toLowerCase(),
      username: security['sasl.username'],
      password: security['sasl.password']
    }
  }
  return options
}

async function main () {
  const req = JSON.parse(await readStdin())
  const mode = modes[req.mode]
  if (!mode) throw new Error(`unknown mode ${req.mode}`)
  setTimeout(() => {
    process.stderr.write(`watchdog: no result after ${req.timeoutMs} ms\n`)
    process.exit(3)
  }, req.timeoutMs).unref()
  const kafka = new Kafka({
    clientId: 'compat-matrix-kafkajs',
    brokers: req.bootstrap.split(',').map(s => s.trim()).filter(Boolean), // a bootstrap list (a cluster) as well as one address
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: req.mode === 'apiversions' ? logLevel.DEBUG : logLevel.ERROR,
    logCreator,
    ...securityOptions(req.security)
  })
  const result = await mode(kafka, req)
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`error: ${err && err.stack ? err.stack : err}\n`)
    process.stdout.write(JSON.stringify({ error: `${err && err.name}: ${err && err.message}` }) + '\n')
    process.exit(2)
  }
)
