// Blobs against a real `folio serve`: an upload linked from a record comes
// back byte for byte, signed and through a bearer URL; a bearer URL for
// another blob does not open this one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Folio, FolioError } from "../src/index.js";
import { newType, startServer } from "./server.mjs";

let server;
let folio;
let photoType;

before(async () => {
  server = await startServer();
  folio = await Folio.connect({ entity: server.entityUrl, app: server.app });
  photoType = await newType(folio, "photo", { file: { type: "blob_link" } });
});

after(() => server?.stop());

test("an uploaded blob, linked from a record, downloads byte for byte", async () => {
  const bytes = new Uint8Array(100_000);
  for (let at = 0; at < bytes.length; at += 65_536) {
    crypto.getRandomValues(bytes.subarray(at, at + 65_536));
  }
  const file = await folio.blobs.upload(bytes, { type: "image/png", name: "cat.png" });
  assert.equal(file.size, bytes.length);
  assert.match(file.hash, /^[0-9a-f]{64}$/);
  const record = await folio.records.create({ type: photoType, content: { file } });
  assert.deepEqual(await folio.blobs.download(record, file), bytes);

  // A bearer URL opens it without any header, and only it.
  const url = await folio.blobs.bearerUrl(record, file);
  const plain = await fetch(url);
  assert.equal(plain.status, 200);
  assert.equal(plain.headers.get("content-type"), "image/png");
  assert.deepEqual(new Uint8Array(await plain.arrayBuffer()), bytes);
  const other = new URL(url);
  other.pathname = other.pathname.replace("cat.png", "dog.png");
  assert.notEqual((await fetch(other)).status, 200);
});

test("a record cannot link bytes never uploaded", async () => {
  const file = { hash: "ab".repeat(32), type: "image/png", name: "x.png", size: 3 };
  await assert.rejects(folio.records.create({ type: photoType, content: { file } }), (error) => {
    assert.ok(error instanceof FolioError);
    assert.equal(error.code, "invalid_link");
    return true;
  });
});
