// A user's store moved as an owner moves it, native → worker → native,
// checked through the API with the SDK at each stop:
//
//   1. `folio serve` with a store that has versions, a deletion, blobs and
//      two apps; `folio export`;
//   2. `folio import --emit-sql --blobs-dir --base-url`, then `wrangler d1
//      execute` and `wrangler r2 object put` into local D1 and R2, served
//      by `wrangler dev`;
//   3. `wrangler d1 export` and `wrangler r2 object get` from there,
//      `folio export --from-d1 --r2-dir`, `folio import` into a new data
//      directory, `folio serve`.
//
// At each stop every record, every version hash in order, every blob's
// bytes and both apps' signatures are as before; the only new version is
// the Entity record's, naming its new server. Run after the worker build
// (`FOLIO_WORKER_PREBUILT=1 node e2e/worker-import.mjs`); state is kept in
// the printed directory when it fails.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppKey, Folio } from "../clients/js/src/index.js";
import {
  ENV, HarnessError, ROOT, TARGET_DIR, WRANGLER, freePort, keyPair, parseJson, run, startWrangler, stopAll,
  stopWrangler, track,
} from "./wrangler.mjs";

// The native servers' certificates are self-signed, on 127.0.0.1: this
// process (and nothing else) skips their check.
process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
process.removeAllListeners("warning");

const FOLIO = join(TARGET_DIR, "debug/folio");
const BUCKET = "folio-blobs";

function folio(data, ...args) {
  return run(FOLIO, ["--data-dir", data, ...args]).stdout;
}

// `folio serve` on `data` and `port`; resolves once it listens, to a stop function.
async function serve(data, port) {
  const child = spawn(
    FOLIO,
    ["--data-dir", data, "serve", "--listen", `127.0.0.1:${port}`, "--http-listen", "off",
      "--base-url", `https://localhost:${port}`],
    { env: { ...ENV, RUST_LOG: "warn" }, stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  track(child);
  let log = "";
  await new Promise((ready, failed) => {
    child.stderr.on("data", (chunk) => {
      log += chunk;
      if (log.includes("listening on https://")) ready();
    });
    child.once("exit", (code) => failed(new HarnessError(`folio serve exited (${code}):\n${log}`)));
  });
  return async () => {
    const gone = new Promise((done) => child.once("exit", done));
    child.kill("SIGTERM");
    await gone;
  };
}

async function connect(url, app) {
  return Folio.connect({ entity: url, app });
}

// Every record (built-in types and deleted records included) with its
// version hashes oldest first, by id; each blob's bytes by record id; and
// the Entity record's id.
async function snapshot(client, blobRecords) {
  const records = new Map();
  for (const options of [{ includeDeleted: true }, { sources: ["resolution"] }]) {
    for await (const record of client.records.list({ ...options, pageSize: 200 })) records.set(record.id, record);
  }
  const entityType = (await client.records.builtinType("entity")).record_id;
  const versions = {};
  let entityRecord = null;
  for (const [id, record] of records) {
    const all = await client.records.versions(id, { entity: record.author.entity });
    versions[id] = all.map((version) => version.version.hash);
    if (record.type.record_id === entityType) entityRecord = id;
  }
  const blobs = {};
  for (const [id, file] of blobRecords) {
    const record = records.get(id);
    blobs[id] = Buffer.from(await client.blobs.download(record, file)).toString("base64");
  }
  return { versions, blobs, entityRecord };
}

// `after` holds what `before` held; only the Entity record has one version more.
function expectMoved(before, after, where) {
  const ids = (snap) => Object.keys(snap.versions).sort();
  if (JSON.stringify(ids(before)) !== JSON.stringify(ids(after))) {
    throw new HarnessError(`${where}: the records differ:\n${ids(before)}\n${ids(after)}`);
  }
  for (const id of ids(before)) {
    const [was, is] = [before.versions[id], after.versions[id]];
    const expected = id === before.entityRecord ? was.length + 1 : was.length;
    if (is.length !== expected || was.some((hash, i) => is[i] !== hash)) {
      throw new HarnessError(`${where}: the versions of ${id} differ:\n${was}\n${is}`);
    }
  }
  if (JSON.stringify(before.blobs) !== JSON.stringify(after.blobs)) {
    throw new HarnessError(`${where}: the blobs' bytes differ`);
  }
  const count = Object.values(after.versions).reduce((sum, list) => sum + list.length, 0);
  console.log(`worker import: ${where}: ${Object.keys(after.versions).length} records, ${count} versions, ` +
    `${Object.keys(after.blobs).length} blobs as before`);
}

async function main() {
  if (!existsSync(join(ROOT, "host-worker/build/index.js"))) {
    throw new HarnessError("host-worker/build/index.js is missing: run (cd host-worker && worker-build --release) first");
  }
  run("cargo", ["build", "--quiet", "--bins", "--tests"]);
  const dir = mkdtempSync(join(tmpdir(), "folio-worker-import-"));
  console.log(`worker import: state in ${dir}`);

  // 1. A native store.
  const native = join(dir, "native");
  const nativePort = await freePort();
  folio(native, "user", "add", "me", "--entity", "localhost", "--base-url", `https://localhost:${nativePort}`);
  const apps = [];
  for (const access of [["--full-access"], ["--full-access", "--name", "Second app"]]) {
    const pair = keyPair();
    const added = parseJson(folio(native, "app", "add", "--user", "me", "--public-key", pair.publicKey, ...access, "--json"),
      "folio app add");
    apps.push({ appId: added.app_id, authorizationId: added.authorization_id, key: await AppKey.fromSeed(pair.seed) });
  }
  let stop = await serve(native, nativePort);
  let client = await connect(`https://localhost:${nativePort}`, apps[0]);
  const note = await client.records.create({
    type: await client.records.builtinType("type"),
    content: {
      name: "note",
      schema: { type: "object", properties: { content: { type: "object", properties: {
        title: { type: "string" }, file: { type: "blob_link", optional: true } } } } },
    },
  });
  const noteType = { entity: note.author.entity, record_id: note.id, version_hash: note.version.hash };
  let edited = await client.records.create({ type: noteType, content: { title: "first" } });
  edited = await client.records.update(edited, { content: { title: "second" } });
  await client.records.update(edited, { content: { title: "third" } });
  const gone = await client.records.create({ type: noteType, content: { title: "to delete" } });
  await client.records.delete(gone);
  const blobRecords = [];
  for (const bytes of [new Uint8Array(0), new TextEncoder().encode("hello"), new Uint8Array(300_000).fill(7)]) {
    const file = await client.blobs.upload(bytes, { type: "application/octet-stream", name: "data.bin" });
    const record = await client.records.create({ type: noteType, content: { title: "a file", file } });
    blobRecords.push([record.id, file]);
  }
  const original = await snapshot(client, blobRecords);
  await stop();
  const archive = join(dir, "me.folio");
  folio(native, "export", "--user", "me", archive);

  // 2. Into the worker's local D1 and R2, served by wrangler dev.
  const workerPort = await freePort();
  const workerUrl = `http://localhost:${workerPort}`;
  const sql = join(dir, "me.sql");
  const objects = join(dir, "objects");
  folio(join(dir, "cli"), "import", archive, "--emit-sql", sql, "--blobs-dir", objects, "--base-url", workerUrl);
  // A project directory of its own, so that `wrangler d1 export --local`
  // (which has no --persist-to) finds this state in its default place.
  const project = join(dir, "project");
  mkdirSync(project);
  cpSync(join(ROOT, "wrangler.toml"), join(project, "wrangler.toml"));
  cpSync(join(ROOT, "migrations"), join(project, "migrations"), { recursive: true });
  const state = join(project, ".wrangler/state");
  const local = ["--local", "--env", "dev", "--persist-to", state];
  run(WRANGLER, ["d1", "migrations", "apply", "DB", ...local]);
  run(WRANGLER, ["d1", "execute", "DB", "--file", sql, ...local]);
  const keys = readdirSync(objects);
  for (const key of keys) {
    run(WRANGLER, ["r2", "object", "put", `${BUCKET}/${key}`, "--file", join(objects, key), ...local]);
  }
  const wrangler = await startWrangler(state, workerPort, join(dir, "wrangler.log"), { FOLIO_BASE_URL: workerUrl });
  client = await connect(workerUrl, apps[0]);
  const onWorker = await snapshot(client, blobRecords);
  expectMoved(original, onWorker, "native → worker");
  await snapshot(await connect(workerUrl, apps[1]), blobRecords);
  await stopWrangler(wrangler);

  // 3. Back from the worker's store to a new native data directory.
  const dump = join(dir, "d1.sql");
  // By table: a database holding the search index (an FTS5 table) cannot
  // be exported whole; these are the tables an archive is made from.
  const tables = ["users", "versions", "blobs", "apps"].flatMap((table) => ["--table", table]);
  run(WRANGLER, ["d1", "export", "DB", "--local", "--env", "dev", "--output", dump, ...tables], { cwd: project });
  const fetched = join(dir, "fetched");
  mkdirSync(fetched);
  for (const key of keys) {
    run(WRANGLER, ["r2", "object", "get", `${BUCKET}/${key}`, "--file", join(fetched, key), ...local]);
  }
  const back = join(dir, "back.folio");
  folio(join(dir, "cli"), "export", "--user", "me", "--from-d1", dump, "--r2-dir", fetched, back);
  const returned = join(dir, "returned");
  const returnedPort = await freePort();
  mkdirSync(returned);
  writeFileSync(join(returned, "settings.json"), JSON.stringify({ base_url: `https://localhost:${returnedPort}` }));
  folio(returned, "import", back);
  stop = await serve(returned, returnedPort);
  client = await connect(`https://localhost:${returnedPort}`, apps[1]);
  expectMoved(onWorker, await snapshot(client, blobRecords), "worker → native");
  await stop();
  if (!readFileSync(archive, "utf8").startsWith('{"header":')) throw new HarnessError("the archive has no header line");
  rmSync(dir, { recursive: true, force: true });
}

try {
  await main();
  console.log("worker import: passed");
} catch (error) {
  console.error(`worker import: ${error instanceof HarnessError ? error.message : error.stack}`);
  process.exitCode = 1;
} finally {
  stopAll("SIGTERM");
}
