// What a write costs on D1: the rows D1 reports written (index entries
// included, which is what it bills) for the load tool's create and
// update, read from the worker's `commit` log lines.
//
//   (cd host-worker && worker-build --release) && node e2e/d1-rows-written.mjs [COUNT]
//
// It provisions a user and a full-access app in local D1 (with `folio ...
// --emit-sql`), starts `wrangler dev`, creates the load tool's type and a
// project record, then COUNT (default 50) records shaped as `folio-load`'s
// creates, and updates each once. Prints min / median / max rows written
// per create and per update. A measurement, not a test: it fails only when
// the worker does not answer or logs no commits.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppKey, Folio } from "../clients/js/src/index.js";
import {
  HarnessError, TARGET_DIR, WRANGLER, freePort, keyPair, parseJson, run, startWrangler, stopAll, stopWrangler,
} from "./wrangler.mjs";

const COUNT = Number(process.argv[2] ?? 50);

function commits(log) {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line.includes('"message":"commit"'))
    .map((line) => JSON.parse(line.slice(line.indexOf("{"))));
}

// The commit lines once wrangler has written every one logged so far: its
// output reaches the file a moment after the request is answered.
async function settledCommits(log) {
  let seen = commits(log).length;
  for (;;) {
    await new Promise((wake) => setTimeout(wake, 500));
    const now = commits(log);
    if (now.length === seen) return now;
    seen = now.length;
  }
}

function spread(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[0]} / ${sorted[Math.floor(sorted.length / 2)]} / ${sorted[sorted.length - 1]}`;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "folio-d1-rows-"));
  const state = join(dir, "state");
  const log = join(dir, "wrangler.log");
  const d1 = (...args) => run(WRANGLER, ["d1", ...args, "--local", "--env", "dev", "--persist-to", state]);
  run("cargo", ["build", "--quiet", "--bins", "--tests"]);
  const folio = (...args) => run(join(TARGET_DIR, "debug/folio"), ["--data-dir", join(dir, "cli"), ...args]);
  d1("migrations", "apply", "DB");
  const port = await freePort();
  const baseUrl = `http://localhost:${port}`;
  const userSql = join(dir, "user.sql");
  folio("user", "add", "me", "--entity", "localhost", "--base-url", baseUrl, "--json", "--emit-sql", userSql);
  d1("execute", "DB", "--file", userSql);
  const pair = keyPair();
  const appSql = join(dir, "app.sql");
  const added = parseJson(folio("app", "add", "--user", "me", "--entity", "localhost", "--public-key", pair.publicKey,
    "--full-access", "--json", "--emit-sql", appSql).stdout, "folio app add");
  d1("execute", "DB", "--file", appSql);
  const wrangler = await startWrangler(state, port, log, {
    FOLIO_BASE_URL: baseUrl, FOLIO_WRITE_RATE: "off", FOLIO_READ_RATE: "off",
  });
  const app = { appId: added.app_id, authorizationId: added.authorization_id, key: await AppKey.fromSeed(pair.seed) };
  const client = await Folio.connect({ entity: baseUrl, app });

  // The load tool's type and records (bench/src/folio.rs).
  const typeRecord = await client.records.create({
    type: await client.records.builtinType("type"),
    content: {
      name: "load_note",
      schema: { type: "object", properties: { content: { type: "object", properties: {
        title: { type: "string", max_length: 200 },
        body: { type: "string", max_length: 4000 },
        person: { type: "entity_link" },
        project: { type: "record_link", optional: true },
        label: { type: "tag_link", sort_property: true },
      } } } },
    },
  });
  const type = { entity: typeRecord.author.entity, record_id: typeRecord.id, version_hash: typeRecord.version.hash };
  const body = (n) => "The quick brown fox jumps over the lazy dog, record ".repeat(18) + n;
  const project = await client.records.create({
    type, content: { title: "project", body: body(0), person: { entity: "localhost" }, label: "bench" },
  });
  const content = (n) => ({
    title: `Load note ${n}`, body: body(n), person: { entity: "localhost" },
    project: { entity: project.author.entity, record_id: project.id }, label: "bench",
  });

  const before = (await settledCommits(log)).length;
  const created = [];
  for (let n = 1; n <= COUNT; n++) created.push(await client.records.create({ type, content: content(n) }));
  const afterCreates = (await settledCommits(log)).length;
  for (const [n, record] of created.entries()) await client.records.update(record, { content: content(COUNT + n) });
  const all = await settledCommits(log);
  await stopWrangler(wrangler);
  const creates = all.slice(before, afterCreates).map((c) => c.rows_written);
  const updates = all.slice(afterCreates).map((c) => c.rows_written);
  if (creates.length !== COUNT || updates.length !== COUNT) {
    throw new HarnessError(`expected ${COUNT} commits of each, found ${creates.length} and ${updates.length} (${log})`);
  }
  console.log(`D1 rows written, min / median / max over ${COUNT}: create ${spread(creates)}; update ${spread(updates)}`);
  rmSync(dir, { recursive: true, force: true });
}

try {
  await main();
} catch (error) {
  console.error(`d1-rows-written: ${error instanceof HarnessError ? error.message : error.stack}`);
  process.exitCode = 2;
} finally {
  stopAll("SIGTERM");
}
