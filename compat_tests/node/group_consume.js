#!/usr/bin/env node
// kafkajs consumer-group driver for compat_tests/test_groups.py.
//
//   node group_consume.js <bootstrap> <topic> <group> <count>
//
// Joins <group> with a kafkajs consumer subscribed to <topic> (fromBeginning), consumes until
// <count> messages arrived, commits the next offset of every partition it read with
// consumer.commitOffsets (autoCommit is off, so the commit is explicit), reads the group's
// committed offsets back with admin.fetchOffsets, then disconnects (LeaveGroup). Prints one JSON
// line: {"messages": [{partition, offset, value}], "committed": [{partition, offset}],
// "groupState": ..., "memberCount": ...}. kafkajs logs go to stderr; a watchdog exits with
// status 3 after WATCHDOG_MS.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const WATCHDOG_MS = 45000

const stderrLogCreator = () => ({ namespace, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
}

async function main () {
  const [bootstrap, topic, groupId, countText] = process.argv.slice(2)
  const count = Number(countText)
  if (!bootstrap || !topic || !groupId || !(count > 0)) {
    throw new Error('usage: group_consume.js <bootstrap> <topic> <group> <count>')
  }
  const kafka = new Kafka({
    clientId: 'compat-kafkajs-group',
    brokers: [bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: logLevel[process.env.COMPAT_KAFKAJS_LOG_LEVEL || 'WARN'] ?? logLevel.WARN,
    logCreator: stderrLogCreator
  })
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 500 })
  const admin = kafka.admin()
  const messages = []
  const next = new Map() // partition -> next offset to commit
  let done
  const finished = new Promise(resolve => { done = resolve })

  await consumer.connect()
  await admin.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        messages.push({ partition, offset: message.offset, value: message.value.toString() })
        next.set(partition, (BigInt(message.offset) + 1n).toString())
        if (messages.length >= count) done()
      }
    })
    await finished
    await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset })))
    const described = await admin.describeGroups([groupId])
    const [fetched] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return {
      messages,
      committed: fetched.partitions.map(p => ({ partition: p.partition, offset: p.offset })),
      groupState: described.groups[0].state,
      memberCount: described.groups[0].members.length
    }
  } finally {
    await consumer.disconnect()
    await admin.disconnect()
  }
}

const watchdog = setTimeout(() => {
  process.stderr.write(`watchdog: no result after ${WATCHDOG_MS} ms\n`)
  process.exit(3)
}, WATCHDOG_MS)

main().then(
  result => {
    clearTimeout(watchdog)
    process.stdout.write(JSON.stringify(result) + '\n')
  },
  err => {
    process.stderr.write(`error: ${err && err.stack ? err.stack : err}\n`)
    process.exit(2)
  }
)
