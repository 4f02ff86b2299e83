#!/usr/bin/env node
// Interop driver for wqhost's Azure backend tests: sends and receives queue messages with
// Microsoft's own JavaScript client (@azure/storage-queue), so the Go tests can check that
// wqhost reads what other producers write and writes what other consumers read.
//
// The connection string comes from AZURE_STORAGE_CONNECTION_STRING (never argv: it holds
// the account key). Bodies cross stdin/stdout as base64 so any bytes survive.
//
//   node interop.js send <queue> <base64|text>     stdin: JSON array of base64 bodies
//                                                  stdout: JSON array of message ids
//   node interop.js receive <queue> <base64|text> <count> [timeoutSeconds]
//        receives and deletes <count> messages; stdout: JSON array of
//        {"id", "text" (raw message text), "body" (decoded body, base64), "dequeueCount"}
//
// Under "base64" the message text is the base64 of the body, as the Azure Functions queue
// bindings write and expect it; under "text" it is the body itself.
"use strict";

const { QueueClient } = require("@azure/storage-queue");

function fail(msg) {
  process.stderr.write(`interop.js: ${msg}\n`);
  process.exit(2);
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  const [cmd, queue, encoding, countArg, timeoutArg] = process.argv.slice(2);
  const conn = process.env.AZURE_STORAGE_CONNECTION_STRING;
  if (!conn) fail("AZURE_STORAGE_CONNECTION_STRING is not set");
  if (!queue) fail("missing queue name");
  if (encoding !== "base64" && encoding !== "text") fail(`encoding ${encoding}: want base64 or text`);
  const client = new QueueClient(conn, queue);
  await client.createIfNotExists();

  if (cmd === "send") {
    const bodies = JSON.parse(await readStdin());
    const ids = [];
    for (const b64 of bodies) {
      const text = encoding === "base64" ? b64 : Buffer.from(b64, "base64").toString("utf8");
      const res = await client.sendMessage(text);
      ids.push(res.messageId);
    }
    process.stdout.write(JSON.stringify(ids));
    return;
  }
  if (cmd === "receive") {
    const want = parseInt(countArg, 10);
    if (!(want >= 0)) fail(`count ${countArg}: want a number`);
    const deadline = Date.now() + 1000 * (parseInt(timeoutArg || "30", 10));
    const out = [];
    while (out.length < want) {
      if (Date.now() > deadline) fail(`timed out with ${out.length} of ${want} messages`);
      const res = await client.receiveMessages({
        numberOfMessages: Math.min(32, want - out.length),
        visibilityTimeout: 60,
      });
      if (res.receivedMessageItems.length === 0) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      for (const m of res.receivedMessageItems) {
        const body = encoding === "base64"
          ? Buffer.from(m.messageText, "base64")
          : Buffer.from(m.messageText, "utf8");
        out.push({ id: m.messageId, text: m.messageText, body: body.toString("base64"), dequeueCount: m.dequeueCount });
        await client.deleteMessage(m.messageId, m.popReceipt);
      }
    }
    process.stdout.write(JSON.stringify(out));
    return;
  }
  fail(`unknown command ${cmd}: want send or receive`);
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
