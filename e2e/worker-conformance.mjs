// The conformance suite against the edge host in `wrangler dev --env dev`
// (workerd, local D1, R2 and Durable Objects), as conformance.rs runs it
// against `folio serve`:
//
//   (cd host-worker && worker-build --release)     # the caller builds the worker
//   node e2e/worker-conformance.mjs [SUITE FLAGS]  # e.g. --only events/
//
// (FOLIO_CONFORMANCE_FILTER=TEXT is `--only TEXT`, as for the native run.)
// It applies the D1 migrations into a fresh state directory, provisions the
// user `me` (entity `localhost`), a second user `you` (whose store the
// rate-limit checks read too), a full-access app and a scoped app with SQL
// from `folio user add … --emit-sql` and `folio app add … --emit-sql`, starts
// wrangler dev on a free port, and runs folio-conformance against it; it exits
// with the suite's status (2 when the harness itself fails) and stops wrangler
// on every path. The state directory is removed after a passing run and kept
// (its path printed) otherwise: wrangler.log, the SQL, target.json, state/.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ENV, HarnessError, ROOT, TARGET_DIR, WRANGLER, freePort, keyPair, parseJson, run, runShown, startWrangler,
  stopAll, stopWrangler,
} from "./wrangler.mjs";

// Checks the worker does not pass yet, each with the reason (as
// NATIVE_EXCLUSIONS in host-native/tests/conformance.rs); passed to the
// suite as `--exclude NAME=REASON`.
const WORKER_EXCLUSIONS = [];

const USER = "me";
const ENTITY = "localhost";
// A second user, whose store the rate-limit checks read as well: an
// address's rates hold across users' Durable Objects.
const OTHER_USER = "you";
const OTHER_ENTITY = "you.localhost";

// The worker's base URL. Its host is the user's entity, as natively: with
// two users, discovery (`HEAD /`) finds the user whose entity is the
// request's host (with one, it answers for that one whatever the host).
// wrangler listens on 127.0.0.1, which `localhost` resolves to.
const baseUrlOf = (port) => `http://${ENTITY}:${port}`;

const hexId = () => randomBytes(16).toString("hex");

// wrangler dev for the suite: the base URL, and rates the rate-limit
// checks can exceed: local workerd serves one user's object slower than
// the defaults (300 reads, 100 writes a second). The check that an
// address's reads are counted across users needs the server to answer
// them faster than twice the per-second rate (it reads nearly two bursts
// and needs the bucket not to refill meanwhile); workerd served about 80
// a second here, hence 20. The other checks retry their 429s.
//
// The suite's hostile peer (conformance/src/hostile.rs) is reached through
// its plain-HTTP relay, as the edge reaches other servers in development
// (FOLIO_PEER_RELAY); the quota for strangers' versions is one the
// federation checks can fill with a few versions, as natively; and the
// notification rates are ones their floods exceed at the pace local workerd
// serves one user's object (about 80 requests a second), with fewer
// requests than the 400 at once after which workerd refuses an object's
// queue (503 "restarted mid-request"). A heartbeat interval of a second,
// as natively, so that the heartbeat check waits two, not thirty.
const suiteWrangler = (state, port, log, relay) =>
  startWrangler(state, port, log, {
    FOLIO_BASE_URL: baseUrlOf(port),
    FOLIO_READ_RATE: "20/100",
    FOLIO_WRITE_RATE: "10/20",
    FOLIO_PEER_RELAY: `http://${relay}`,
    FOLIO_UNSOLICITED_QUOTA: "1000/1MiB",
    FOLIO_NOTIFICATION_RATE: "20/100",
    FOLIO_NOTIFICATION_DOMAIN_RATE: "10/50",
    FOLIO_HEARTBEAT_MS: "1000",
  });

async function main(suiteArgs) {
  if (!existsSync(join(ROOT, "host-worker/build/index.js"))) {
    throw new HarnessError("host-worker/build/index.js is missing: run (cd host-worker && worker-build --release) first");
  }
  const dir = mkdtempSync(join(tmpdir(), "folio-worker-conformance-"));
  const state = join(dir, "state");
  const log = join(dir, "wrangler.log");
  console.log(`worker conformance: state in ${dir}`);
  const d1 = (...args) => run(WRANGLER, ["d1", ...args, "--local", "--env", "dev", "--persist-to", state]);
  const d1File = (file) => d1("execute", "DB", "--file", file);

  // `--bins --tests`: the crates and features of `cargo test`, whose builds it reuses.
  run("cargo", ["build", "--quiet", "--bins", "--tests"]);
  const folioBin = join(TARGET_DIR, "debug/folio");
  const suiteBin = join(TARGET_DIR, "debug/folio-conformance");
  // The CLI's own data directory stays empty: with --emit-sql it writes SQL, not a store.
  const folio = (...args) => run(folioBin, ["--data-dir", join(dir, "folio-cli"), ...args]);

  d1("migrations", "apply", "DB");
  const { ca: _ca, ...hostilePeer } = parseJson(
    run(suiteBin, ["--write-hostile-peer", dir]).stdout,
    "folio-conformance --write-hostile-peer",
  );
  const port = await freePort();
  const baseUrl = baseUrlOf(port);

  const full = keyPair();
  const readType = hexId();
  const writeType = hexId();
  const target = {
    base_url: baseUrl,
    user: USER,
    entity: ENTITY,
    // wrangler dev serves plain HTTP; FOLIO_DEV exempts it from the HTTPS redirect.
    transport: false,
    password: null,
    other_user: OTHER_USER,
    full_app: null,
    scoped_app: null,
    // The faults/* checks make local D1 and R2 fail through this.
    fault_hook: [process.execPath, join(ROOT, "e2e/worker-fault.mjs"), state],
    hostile_peer: hostilePeer,
  };
  const credentials = (app, key) => ({ app_id: app.app_id, authorization_id: app.authorization_id, private_key: key.seed });
  const emitSql = folio("user", "add", "--help").stdout.includes("--emit-sql");

  let wrangler;
  if (emitSql) {
    const userSql = join(dir, "user.sql");
    const user = parseJson(
      folio("user", "add", USER, "--entity", ENTITY, "--base-url", baseUrl, "--json", "--emit-sql", userSql).stdout,
      "folio user add",
    );
    target.password = user.password;
    d1File(userSql);
    const otherSql = join(dir, "other-user.sql");
    folio("user", "add", OTHER_USER, "--entity", OTHER_ENTITY, "--base-url", baseUrl, "--json", "--emit-sql", otherSql);
    d1File(otherSql);
    const appAdd = (name, key, access) => {
      const sql = join(dir, `${name}.sql`);
      const out = folio("app", "add", "--user", USER, "--entity", ENTITY, "--public-key", key.publicKey,
        ...access, "--json", "--emit-sql", sql).stdout;
      d1File(sql);
      return parseJson(out, "folio app add");
    };
    target.full_app = credentials(appAdd("full-app", full, ["--full-access"]), full);
    target.scoped_app = { ...target.full_app, read_type: readType, write_type: writeType };
    writeFileSync(join(dir, "target.json"), JSON.stringify(target, null, 2));

    // The scoped app's grant names Type records that exist only in the edge
    // store, which `folio app add --emit-sql` cannot see: it is authorized
    // as a real app is, registration and the consent page, by the suite's
    // own client (which creates the two types first with the full app).
    wrangler = await suiteWrangler(state, port, log, hostilePeer.relay);
    const authorized = spawnSync(suiteBin, ["--target", join(dir, "target.json"), "--authorize-scoped-app"],
      { cwd: ROOT, env: ENV, encoding: "utf8", timeout: 120_000 });
    if (authorized.status !== 0) {
      throw new HarnessError(`folio-conformance --authorize-scoped-app failed (exit ${authorized.status}):\n${authorized.stderr}`);
    }
    const scopedApp = parseJson(authorized.stdout, "folio-conformance --authorize-scoped-app");
    target.scoped_app = { ...scopedApp, read_type: readType, write_type: writeType };
  } else {
    throw new HarnessError("folio user add has no --emit-sql: the worker's user cannot be provisioned");
  }
  writeFileSync(join(dir, "target.json"), JSON.stringify(target, null, 2));

  wrangler ??= await suiteWrangler(state, port, log, hostilePeer.relay);
  console.log(`worker conformance: wrangler dev answers on ${baseUrl}; running the suite`);
  const excludes = WORKER_EXCLUSIONS.flatMap(([name, reason]) => ["--exclude", `${name}=${reason}`]);
  const filter = process.env.FOLIO_CONFORMANCE_FILTER ? ["--only", process.env.FOLIO_CONFORMANCE_FILTER] : [];
  const status = await runShown(suiteBin, ["--target", join(dir, "target.json"), ...excludes, ...filter, ...suiteArgs]);
  await stopWrangler(wrangler);
  if (status === 0) {
    rmSync(dir, { recursive: true, force: true });
  } else {
    console.log(`worker conformance: the suite exited ${status}; kept ${dir} (wrangler.log, target.json, state/)`);
  }
  return status;
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  console.error(`worker conformance: ${error instanceof HarnessError ? error.message : error.stack}`);
  process.exitCode = 2;
} finally {
  stopAll("SIGTERM");
}
