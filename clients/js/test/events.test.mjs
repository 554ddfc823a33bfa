// Live events against a real `folio serve`: records arrive once each, an
// app's own writes are left out with its client id, and a subscription
// cut off by a server crash resumes from Last-Event-Id with nothing lost
// or repeated.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Folio, filter } from "../src/index.js";
import { newType, startServer } from "./server.mjs";

let server;
let folio;

before(async () => {
  server = await startServer();
  folio = await Folio.connect({ entity: server.entityUrl, app: server.app });
});

after(() => server?.stop());

const counterType = (name) => newType(folio, name, { n: { type: "int" } });

/** The next `count` records of a subscription. */
async function take(subscription, count) {
  const records = [];
  for await (const record of subscription) {
    records.push(record);
    if (records.length === count) break;
  }
  return records;
}

test("records written after subscribing arrive once each, in order", async () => {
  const type = await counterType("live_order");
  let subscription;
  await new Promise((resolve) => {
    subscription = folio.events.subscribe({ filter: filter.type(type), onOpen: resolve });
  });
  for (let n = 0; n < 5; n += 1) await folio.records.create({ type, content: { n } });
  const records = await take(subscription, 5);
  assert.deepEqual(records.map((r) => r.content.n), [0, 1, 2, 3, 4]);
  subscription.close();
});

test("with a client id, an app does not receive its own writes", async () => {
  const type = await counterType("live_client_id");
  const quiet = new Folio({ entity: folio.entity, endpoints: folio.endpoints, app: server.app, clientId: "c".repeat(32) });
  let subscription;
  await new Promise((resolve) => {
    subscription = quiet.events.subscribe({ filter: filter.type(type), onOpen: resolve });
  });
  await quiet.records.create({ type, content: { n: 1 } });
  await folio.records.create({ type, content: { n: 2 } });
  const [record] = await take(subscription, 1);
  assert.equal(record.content.n, 2, "its own write (n = 1) was left out");
  subscription.close();
});

test("after a server crash the subscription resumes from Last-Event-Id: nothing lost, nothing repeated", async () => {
  const type = await counterType("live_resume");
  let opens = 0;
  let subscription;
  await new Promise((resolve) => {
    subscription = folio.events.subscribe({
      filter: filter.type(type),
      onOpen: () => { opens += 1; resolve(); },
    });
  });
  for (let n = 0; n < 3; n += 1) await folio.records.create({ type, content: { n } });
  const before = await take(subscription, 3);
  assert.ok(subscription.lastEventId, "an event id to resume from");

  await server.kill();
  await server.start();
  // Written while the subscription is still reconnecting: the server sends
  // them as its catch-up from Last-Event-Id.
  for (let n = 3; n < 6; n += 1) await folio.records.create({ type, content: { n } });
  const after = await take(subscription, 3);
  assert.deepEqual([...before, ...after].map((r) => r.content.n), [0, 1, 2, 3, 4, 5]);
  assert.ok(opens >= 2, `reconnected (${opens} connections)`);
  subscription.close();
});
