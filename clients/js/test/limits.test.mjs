// Rate limits against a real `folio serve` allowing one write a second: the
// SDK waits out a 429's Retry-After and signs the request afresh, so writes
// go through; with no retries the 429 is the app's FolioError.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Folio } from "../src/index.js";
import { newType, startServer } from "./server.mjs";

let server;
let folio;
let type;

before(async () => {
  server = await startServer({ serveArgs: ["--write-rate", "1/1"] });
  folio = await Folio.connect({ entity: server.entityUrl, app: server.app });
  type = await newType(folio, "limited", { n: { type: "int" } });
});

after(() => server?.stop());

test("a rate-limited write is sent again after Retry-After, signed afresh", async () => {
  const started = Date.now();
  for (let n = 0; n < 3; n += 1) await folio.records.create({ type, content: { n } });
  assert.ok(Date.now() - started >= 1_000, "the writes waited for the rate");
});

test("with no retries the 429 comes to the app", async () => {
  const impatient = new Folio({ entity: folio.entity, endpoints: folio.endpoints, app: server.app, retries: 0 });
  await impatient.records.create({ type, content: { n: 10 } }, { validate: false }).catch(() => {});
  await assert.rejects(impatient.records.create({ type, content: { n: 11 } }, { validate: false }), {
    name: "FolioError",
    status: 429,
    code: "rate_limited",
  });
});
