// Discovery and every record operation against a real `folio serve`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Folio, FolioError, filter, versionHash, versionLink } from "../src/index.js";
import { newType, startServer } from "./server.mjs";

let server;
let folio;
let noteType;

before(async () => {
  server = await startServer();
  folio = await Folio.connect({ entity: server.entityUrl, app: server.app });
  noteType = await newType(folio, "note", {
    title: { type: "string", max_length: 100 },
    n: { type: "int", optional: true },
  });
});

after(() => server?.stop());

test("discovery finds the store from the entity's URL", async () => {
  assert.equal(folio.entity, "localhost");
  assert.match(folio.endpoints.records, /\/api\/me\/records$/);
  assert.match(folio.endpoints.record, /\{entity\}\/\{record_id\}$/);
});

test("create, get, update and delete a record; its versions in order", async () => {
  const created = await folio.records.create({ type: noteType, content: { title: "first" } });
  assert.equal(created.content.title, "first");
  assert.equal(await versionHash(created), created.version.hash, "the core hashes it as the server did");

  const read = await folio.records.get(created.id);
  assert.deepEqual(read.content, { title: "first" });

  const updated = await folio.records.update(read, { content: { title: "second" } });
  assert.equal(updated.version.parent_hash, created.version.hash);

  // An update from the stale first version is refused: someone wrote since.
  await assert.rejects(folio.records.update(read, { content: { title: "lost" } }), (error) => {
    assert.ok(error instanceof FolioError);
    assert.equal(error.status, 409);
    assert.equal(error.code, "version_conflict");
    return true;
  });

  const tombstone = await folio.records.delete(updated);
  assert.equal(tombstone.no_content.action, "delete");
  const versions = await folio.records.versions(created.id);
  assert.deepEqual(
    versions.map((v) => v.version.hash),
    [created.version.hash, updated.version.hash, tombstone.version.hash],
  );
});

test("a list pages through 250 records in order, each once", async () => {
  const batchType = await newType(folio, `run_${Date.now()}`, { n: { type: "int" } });
  for (let n = 0; n < 250; n += 1) {
    await folio.records.create({ type: batchType, content: { n } });
  }
  const seen = [];
  let pages = 0;
  for (let page = await folio.records.page({ filter: filter.type(batchType), pageSize: 40 }); page; page = await page.next()) {
    pages += 1;
    seen.push(...page.records.map((r) => r.content.n));
  }
  assert.equal(pages, 7);
  assert.equal(seen.length, 250);
  assert.deepEqual(seen, [...Array(250).keys()].reverse(), "newest first, each once");

  let counted = 0;
  for await (const record of folio.records.list({ filter: filter.type(batchType), sort: "$['received_at']+asc", pageSize: 100 })) {
    assert.equal(record.content.n, counted);
    counted += 1;
  }
  assert.equal(counted, 250);
});

test("search: the records holding every word, best first, or in a sort", async () => {
  const word = `w${noteType.record_id.slice(0, 12)}`;
  const long = await folio.records.create({ type: noteType, content: { title: `a long title naming ${word} once` } });
  const short = await folio.records.create({ type: noteType, content: { title: `${word} soon` } });
  await folio.records.create({ type: noteType, content: { title: "nothing to find" } });
  const ranked = await folio.records.page({ search: word });
  assert.deepEqual(ranked.records.map((r) => r.id), [short.id, long.id], "the short title first");
  assert.equal(ranked.nextPage, null, "a ranked search is one page");
  const sorted = [];
  for await (const record of folio.records.list({ search: `${word.toUpperCase()}`, sort: "$['received_at']+asc", pageSize: 1 })) {
    sorted.push(record.id);
  }
  assert.deepEqual(sorted, [long.id, short.id], "every match, in the sort, a page at a time");
  await assert.rejects(folio.records.page({ search: "?!" }), { status: 400, code: "invalid_parameter" });
});

test("problems are FolioErrors with the protocol's code", async () => {
  await assert.rejects(folio.records.get("0".repeat(32)), { name: "FolioError", status: 404, code: "record_not_found" });
  await assert.rejects(folio.records.create({ type: noteType, content: { title: 7 } }), {
    status: 400,
    code: "schema_violation",
  });
  await assert.rejects(folio.records.page({ filter: filter.raw("$['author'") }), { status: 400, code: "invalid_filter" });
  // Filters match links and tags: a text field of the type named is refused, and the error says so.
  const onTitle = filter.and(filter.type(noteType), filter.at("content.title", filter.value.tag("first")));
  await assert.rejects(folio.records.page({ filter: onTitle }), (error) => {
    assert.equal(error.code, "invalid_filter");
    assert.match(error.message, /`\$\['content'\]\['title'\]` is a string in type `note`/);
    return true;
  });
  const stranger = new Folio({ entity: folio.entity, endpoints: folio.endpoints });
  await assert.rejects(stranger.records.get("0".repeat(32)), { status: 404 });
});

test("ensureType twice is one type, and changed content is a new version of it", async () => {
  const content = (max) => ({ name: "ensured", schema: { type: "object", properties: {
    content: { type: "object", properties: { title: { type: "string", max_length: max } } } } } });
  const first = await folio.records.ensureType(content(10));
  assert.deepEqual(await folio.records.ensureType(content(10)), first, "the same content: the same version");
  const changed = await folio.records.ensureType(content(20));
  assert.equal(changed.record_id, first.record_id, "the same Type record");
  assert.notEqual(changed.version_hash, first.version_hash);
  // A second type of the name, as stores from before hold: refused, naming both.
  const other = await folio.records.create({ type: await folio.records.builtinType("type"), content: content(30) });
  await assert.rejects(folio.records.ensureType(content(40)), (error) => {
    assert.match(error.message, /2 types are named ensured/);
    assert.ok(error.message.includes(other.id) && error.message.includes(first.record_id), error.message);
    return true;
  });
});

test("a record where a link is meant is taken for its link; a wrong argument is a TypeError naming it", async () => {
  const created = await folio.records.create({ type: noteType, content: { title: "linked" } });
  // A record, a link, or the id: the same record.
  assert.equal((await folio.records.get(created)).id, created.id);
  assert.equal((await folio.records.get({ entity: created.author.entity, record_id: created.id })).id, created.id);
  assert.equal((await folio.records.versions(created)).length, 1);
  // The Type record itself where its version link is meant.
  const typeRecord = await folio.records.get(noteType.record_id);
  const again = await folio.records.create({ type: typeRecord, content: { title: "typed by its record" } });
  assert.deepEqual(again.type, noteType);
  const listed = await folio.records.page({ filter: filter.type(typeRecord), pageSize: 200 });
  assert.ok(listed.records.some((record) => record.id === again.id));

  const requests = [];
  const watched = new Folio({
    entity: folio.entity,
    endpoints: folio.endpoints,
    app: server.app,
    fetch: (...args) => {
      requests.push(String(args[0]));
      return fetch(...args);
    },
  });
  for (const [call, named] of [
    [() => watched.records.get({ title: "not a record" }), /records\.get\(id\): expected a record id/],
    [() => watched.records.get(undefined), /records\.get\(id\).*got undefined/],
    [() => watched.records.update({ id: created.id }, { content: {} }), /records\.update\(record, changes\): record: expected a record/],
    [() => watched.records.update(created, "title"), /records\.update\(record, changes\): changes: expected an object/],
    [() => watched.records.delete(created.id), /records\.delete\(record\): expected a record/],
    [() => watched.records.versions([created]), /records\.versions\(id\)/],
    [() => watched.records.create({ type: "note", content: {} }), /records\.create\(body\): body\.type: expected a version link/],
    [() => watched.records.page({ filter: filter.type({ record_id: created.id }) }), /filter\.value\.record\(link\)/],
  ]) {
    await assert.rejects(async () => call(), (error) => {
      assert.ok(error instanceof TypeError, `${error}`);
      assert.match(error.message, named);
      return true;
    });
  }
  assert.deepEqual(requests, [], "no request left for a wrong argument");
});

test("a record changed on the way fails its hash check", async () => {
  const created = await folio.records.create({ type: noteType, content: { title: "true" } });
  // A fetch that rewrites the record's content in every answer, as a
  // meddling proxy would.
  const meddling = async (...args) => {
    const response = await fetch(...args);
    const text = await response.text();
    const changed = text.replaceAll('"title":"true"', '"title":"false"');
    return new Response(changed, { status: response.status, headers: response.headers });
  };
  const fooled = new Folio({ entity: folio.entity, endpoints: folio.endpoints, app: server.app, fetch: meddling });
  await assert.rejects(fooled.records.get(created.id), { name: "FolioError", code: "hash_mismatch" });
  const trusting = new Folio({ entity: folio.entity, endpoints: folio.endpoints, app: server.app, fetch: meddling, verify: false });
  assert.equal((await trusting.records.get(created.id)).content.title, "false");
});

test("a record that breaks its type's schema is refused before any write", async () => {
  const sent = [];
  const counting = (url, init) => {
    sent.push(`${init?.method ?? "GET"} ${new URL(url).pathname}`);
    return fetch(url, init);
  };
  const careful = new Folio({ entity: folio.entity, endpoints: folio.endpoints, app: server.app, fetch: counting });
  await assert.rejects(careful.records.create({ type: noteType, content: { title: "x".repeat(101) } }), (error) => {
    assert.equal(error.code, "schema_violation");
    assert.match(error.detail, /\$\['content'\]\['title'\]/);
    return true;
  });
  await assert.rejects(careful.records.create({ type: noteType, content: { title: "ok", extra: 1 } }), {
    code: "schema_violation",
  });
  assert.ok(sent.every((line) => line.startsWith("GET ")), `only the type was read: ${sent}`);
  // A valid one goes through, with the type read once.
  await careful.records.create({ type: noteType, content: { title: "fine" } });
  assert.equal(sent.filter((line) => line.startsWith("GET ")).length, 1);
  assert.equal(sent.filter((line) => line.startsWith("POST ")).length, 1);
});

test("authentication problems are FolioErrors too: an unknown app, a wrong key", async () => {
  const { AppKey, newRecordId } = await import("../src/index.js");
  const stranger = new Folio({
    entity: folio.entity,
    endpoints: folio.endpoints,
    app: { appId: newRecordId(), authorizationId: newRecordId(), key: await AppKey.generate() },
  });
  await assert.rejects(stranger.records.page(), { name: "FolioError", status: 401, code: "unknown_app" });
  const impostor = new Folio({
    entity: folio.entity,
    endpoints: folio.endpoints,
    app: { ...server.app, key: await AppKey.generate() },
  });
  await assert.rejects(impostor.records.page(), { name: "FolioError", status: 401, code: "invalid_signature" });
});

test("include_links: the records a record links, joined to it", async () => {
  const { recordLink } = await import("../src/index.js");
  const linker = await newType(folio, "linker", { ref: { type: "record_link" } });
  const target = await folio.records.create({ type: noteType, content: { title: "linked" } });
  const source = await folio.records.create({ type: linker, content: { ref: recordLink(target) } });
  const { record, linkedRecord } = await folio.records.getWithLinks(source.id, { includeLinks: ["$['content']['ref']"] });
  assert.equal(record.id, source.id);
  assert.equal(linkedRecord(record.content.ref)?.content.title, "linked");
  const page = await folio.records.page({ filter: filter.type(linker), includeLinks: ["$['content']['ref']"] });
  assert.equal(page.linkedRecord(page.records[0].content.ref)?.id, target.id);
});

test("each deletion action makes its tombstone; a tombstone is not updated", async () => {
  for (const action of ["delete", "local", "leave"]) {
    const record = await folio.records.create({ type: noteType, content: { title: action } });
    const tombstone = await folio.records.delete(record, { action });
    assert.equal(tombstone.no_content.action, action);
    assert.equal(tombstone.content, undefined);
    await assert.rejects(folio.records.update(tombstone, { content: { title: "again" } }, { validate: false }), {
      status: 410,
      code: "record_deleted",
    });
  }
  await assert.rejects(folio.records.delete(await folio.records.create({ type: noteType, content: { title: "x" } }), { action: "shred" }), {
    status: 400,
    code: "invalid_body",
  });
});
