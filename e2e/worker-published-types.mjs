// Shared types on the edge host (docs/apps.md, "Shared record types"), as an
// operator installs them there: the real apps' six types
// (../shared/real-types) installed by their published ids with
// `folio type add --published types.baq.dev/ID --emit-sql` for two users,
// run on local D1 with `wrangler d1 execute`, then `wrangler dev --env dev`:
// an app on the SDK writes a conversation and a message of those types as
// the real messaging app does, and the other user's store receives both
// (handed over between the users' Durable Objects).
//
//   (cd host-worker && worker-build --release)         # the caller builds the worker
//   cargo build --bin folio && (cd clients/js && npm run build)
//   node e2e/worker-published-types.mjs
//
// It exits 0 when every step passed, 1 when one did not and 2 when the
// harness itself failed, and stops wrangler on every path; the state
// directory is kept (its path printed) unless the run passed.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  HarnessError, ROOT, TARGET_DIR, WRANGLER, freePort, keyPair, parseJson, run, startWrangler, stopAll, stopWrangler,
} from "./wrangler.mjs";

const PUBLISHER = "types.baq.dev";
// Each real type's file and the record id it is published under
// (../shared/real-types/README.md).
const REAL_TYPES = [
  ["post.json", "875d6b82645e4833a3f0dca3fb79d69d"],
  ["message.json", "153b3cb3a2f0494e950599de1cc13ef3"],
  ["conversation.json", "7583995c51cf44ad972fdc123105e1dc"],
  ["file.json", "2b6f7bc8ffd54c8db8062700c040e04f"],
  ["folder.json", "3050fc130d4142a9994af0ef7c89099e"],
  ["task.json", "fe727f22b5c34fb185a370449e4f0128"],
];
const USERS = [
  ["me", "localhost"],
  ["you", "you.localhost"],
];

async function main() {
  for (const needed of ["host-worker/build/index.js", "clients/js/pkg/folio_core_bg.wasm"]) {
    if (!existsSync(join(ROOT, needed))) throw new HarnessError(`${needed} is missing: build it first (see the header)`);
  }
  const { AppKey, Folio, versionLink } = await import("../clients/js/src/index.js");
  const dir = mkdtempSync(join(tmpdir(), "folio-worker-published-types-"));
  const state = join(dir, "state");
  const log = join(dir, "wrangler.log");
  console.log(`worker published types: state in ${dir}`);
  const d1 = (...args) => run(WRANGLER, ["d1", ...args, "--local", "--env", "dev", "--persist-to", state]);
  const folioBin = join(TARGET_DIR, "debug/folio");
  const folio = (...args) => run(folioBin, ["--data-dir", join(dir, "folio-cli"), ...args]);

  d1("migrations", "apply", "DB");
  const port = await freePort();
  const baseUrl = `http://localhost:${port}`;
  const apps = {};
  const installed = {};
  for (const [user, entity] of USERS) {
    const userSql = join(dir, `${user}.sql`);
    folio("user", "add", user, "--entity", entity, "--base-url", baseUrl, "--json", "--emit-sql", userSql);
    d1("execute", "DB", "--file", userSql);
    const key = keyPair();
    const appSql = join(dir, `${user}-app.sql`);
    const app = parseJson(
      folio("app", "add", "--user", user, "--entity", entity, "--public-key", key.publicKey, "--full-access",
        "--json", "--emit-sql", appSql).stdout,
      "folio app add",
    );
    d1("execute", "DB", "--file", appSql);
    apps[user] = { appId: app.app_id, authorizationId: app.authorization_id, key: await AppKey.fromSeed(key.seed) };
    installed[user] = [];
    for (const [file, id] of REAL_TYPES) {
      const typeSql = join(dir, `${user}-${file}.sql`);
      const link = parseJson(
        folio("type", "add", "--user", user, "--entity", entity, "--published", `${PUBLISHER}/${id}`, "--json",
          "--emit-sql", typeSql, join(ROOT, "../shared/real-types", file)).stdout,
        "folio type add --published",
      );
      d1("execute", "DB", "--file", typeSql);
      installed[user].push(link);
    }
  }
  const failures = [];
  const check = (ok, what) => {
    console.log(`${ok ? "ok" : "FAILED"}: ${what}`);
    if (!ok) failures.push(what);
  };
  check(
    JSON.stringify(installed.me) === JSON.stringify(installed.you),
    "both stores hold the same versions of the six types",
  );

  const wrangler = await startWrangler(state, port, log, { FOLIO_BASE_URL: baseUrl });
  try {
    const me = await Folio.connect({ entity: baseUrl, app: apps.me });
    // Discovery answers for `me` at this host; `you` is served beside it.
    const yourEndpoints = Object.fromEntries(
      Object.entries(me.endpoints).map(([name, url]) => [name, url.replace("/api/me/", "/api/you/")]),
    );
    const you = new Folio({ entity: "you.localhost", endpoints: yourEndpoints, app: apps.you });

    const [, messageType, conversationType] = REAL_TYPES.map(([, id]) => id);
    const messageRecord = await me.records.get(messageType, { entity: PUBLISHER });
    check(
      messageRecord.source === "resolution" && messageRecord.version.hash === installed.me[1].version_hash,
      "the worker serves the installed message type as types.baq.dev's, a resolution",
    );
    const conversationRecord = await me.records.get(conversationType, { entity: PUBLISHER });
    const readers = [{ entity: "localhost" }, { entity: "you.localhost" }];
    const conversation = await me.records.create({
      type: versionLink(conversationRecord),
      permissions: { read: readers, write: [] },
      content: {},
    });
    const message = await me.records.create({
      type: versionLink(messageRecord),
      permissions: { read: readers },
      content: { conversation: { entity: "localhost", record_id: conversation.id }, text: "Hello from the edge" },
    });
    check(message.type.entity === PUBLISHER, "the app's message of the real type is accepted");

    const deadline = Date.now() + 30_000;
    let received = null;
    while (Date.now() < deadline && received === null) {
      try {
        received = await you.records.get(message.id, { entity: "localhost" });
      } catch {
        await new Promise((wake) => setTimeout(wake, 250));
      }
    }
    check(received?.version.hash === message.version.hash, "the other user's store received the message");
  } finally {
    await stopWrangler(wrangler);
  }
  if (failures.length) {
    console.log(`worker published types: ${failures.length} failed; kept ${dir}\n${readFileSync(log, "utf8").slice(-4000)}`);
    return 1;
  }
  rmSync(dir, { recursive: true, force: true });
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error instanceof HarnessError ? error.message : error);
    stopAll("SIGKILL");
    process.exit(2);
  },
);
