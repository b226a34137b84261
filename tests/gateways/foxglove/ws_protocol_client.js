// Foxglove's JavaScript client (FoxgloveClient of @foxglove/ws-protocol, on the `ws` package) against a server, for
// the tests: it connects offering one subprotocol, subscribes to the topics given once they are advertised, and
// prints one JSON line per event on stdout (open, serverInfo, advertise, subscribe, message, done, error).
//
//   node ws_protocol_client.js URL SUBPROTOCOL TOPIC[,TOPIC...] MESSAGES_PER_TOPIC TIMEOUT_S
//
// Exit 0 once every topic has brought MESSAGES_PER_TOPIC messages; 1 on an error, a close or the timeout.
// The packages are found through NODE_PATH (an install made beforehand: the tests never download).
"use strict";

const { FoxgloveClient } = require("@foxglove/ws-protocol");
const { WebSocket } = require("ws");

const [url, subprotocol, topicList, perTopic, timeoutS] = process.argv.slice(2);
const topics = topicList.split(",");
const wanted = Number(perTopic);

function say(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

function fail(message) {
  say({ event: "error", message: String(message) });
  process.exit(1);
}

const ws = new WebSocket(url, [subprotocol]);
const client = new FoxgloveClient({ ws });
const subscriptions = new Map(); // subscription id -> topic
const counts = new Map(topics.map((topic) => [topic, 0]));
let finished = false;

setTimeout(() => fail(`timeout: ${JSON.stringify(Object.fromEntries(counts))} messages`), Number(timeoutS) * 1000);

client.on("open", () => say({ event: "open", protocol: ws.protocol }));
client.on("error", (error) => fail(error && error.message ? error.message : error));
client.on("close", (event) => {
  if (!finished) {
    fail(`closed by the server: ${event && event.code} ${event && event.reason}`);
  }
  say({ event: "closed", code: event && event.code });
  process.exit(0);
});
client.on("serverInfo", (info) => say({ event: "serverInfo", name: info.name, capabilities: info.capabilities }));
client.on("advertise", (channels) => {
  say({ event: "advertise", topics: channels.map((channel) => channel.topic) });
  for (const channel of channels) {
    if (topics.includes(channel.topic) && ![...subscriptions.values()].includes(channel.topic)) {
      const id = client.subscribe(channel.id);
      subscriptions.set(id, channel.topic);
      say({ event: "subscribe", topic: channel.topic, subscriptionId: id, schemaName: channel.schemaName });
    }
  }
});
client.on("message", (message) => {
  const topic = subscriptions.get(message.subscriptionId);
  if (topic === undefined) {
    return;
  }
  counts.set(topic, counts.get(topic) + 1);
  const data = Buffer.from(message.data.buffer, message.data.byteOffset, message.data.byteLength);
  say({
    event: "message",
    topic,
    subscriptionId: message.subscriptionId,
    logTime: message.timestamp.toString(),
    data: data.toString("base64"),
  });
  if (!finished && [...counts.values()].every((count) => count >= wanted)) {
    finished = true;
    say({ event: "done", counts: Object.fromEntries(counts) });
    client.close();
  }
});
