// `proxyTo` (docs/federation.md §5) between two real `folio serve`s: me at
// `localhost` on one, a peer at PEER_ENTITY on the other. My app lists the
// peer's records and reads one of them through my server, which asks the
// peer's server, signed as me; each comes back with `source: "proxy"`, and
// my store keeps none of them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Folio, FolioError, filter } from "../src/index.js";
import { PEER_ENTITY, freePort, newType, peerArgs, startServer } from "./server.mjs";

let mine;
let theirs;
let folio;
let peer;
let noteType;
const published = [];
let privateNote;

before(async () => {
  const [myPort, theirPort] = [await freePort(), await freePort()];
  mine = await startServer({ port: myPort, serveArgs: peerArgs(PEER_ENTITY, theirPort) });
  theirs = await startServer({
    port: theirPort,
    user: "peer",
    entity: PEER_ENTITY,
    serveArgs: peerArgs("localhost", myPort),
  });
  folio = await Folio.connect({ entity: mine.entityUrl, app: mine.app });
  peer = await Folio.connect({ entity: theirs.entityUrl, app: theirs.app });
  noteType = await newType(peer, "note", { title: { type: "string" } });
  for (const title of ["one", "two", "three"]) {
    published.push(
      await peer.records.create({ type: noteType, permissions: { read: "public" }, content: { title } }),
    );
  }
  privateNote = await peer.records.create({ type: noteType, content: { title: "the peer's own" } });
});

after(async () => {
  await mine?.stop();
  await theirs?.stop();
});

test("a list with proxyTo is the other entity's records, page after page, none stored", async () => {
  assert.equal(peer.entity, PEER_ENTITY);
  const listed = [];
  for await (const record of folio.records.list({ proxyTo: PEER_ENTITY, filter: filter.type(noteType), pageSize: 2 })) {
    listed.push(record);
  }
  assert.deepEqual(
    listed.map((record) => record.version.hash).sort(),
    published.map((record) => record.version.hash).sort(),
    "the three public notes, over two pages; not the private one",
  );
  for (const record of listed) {
    assert.equal(record.source, "proxy");
    assert.equal(record.author.entity, PEER_ENTITY);
  }
  const page = await folio.records.page({ proxyTo: PEER_ENTITY, filter: filter.type(noteType), pageSize: 2 });
  assert.match(page.nextPage, /proxy_to=peer\.localhost/, "the next page asks the peer too");

  const stored = [];
  for await (const record of folio.records.list({ filter: filter.type(noteType) })) stored.push(record);
  assert.deepEqual(stored, [], "my store keeps nothing it proxied");
});

test("get with proxyTo reads one record from its author's server", async () => {
  const [first] = published;
  const read = await folio.records.get(first.id, { entity: PEER_ENTITY, proxyTo: PEER_ENTITY });
  assert.equal(read.source, "proxy");
  assert.equal(read.version.hash, first.version.hash);
  assert.deepEqual(read.content, { title: "one" });

  const { record } = await folio.records.getWithLinks(first.id, { entity: PEER_ENTITY, proxyTo: PEER_ENTITY });
  assert.equal(record.version.hash, first.version.hash);

  // Without proxyTo my store is asked, and it holds none of the peer's notes.
  await assert.rejects(folio.records.get(first.id, { entity: PEER_ENTITY }), (error) => {
    assert.ok(error instanceof FolioError);
    assert.equal(error.status, 404);
    return true;
  });
  // What the peer keeps to itself stays there.
  await assert.rejects(
    folio.records.get(privateNote.id, { entity: PEER_ENTITY, proxyTo: PEER_ENTITY }),
    (error) => error instanceof FolioError && error.status === 404,
  );
});
