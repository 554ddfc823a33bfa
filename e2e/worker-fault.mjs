// The conformance suite's fault hook for the edge host under `wrangler dev`
// (e2e/worker-conformance.mjs passes it as the target's `fault_hook`):
//
//   node e2e/worker-fault.mjs STATE_DIR FAULT on|off
//
// makes wrangler's local D1 or R2, persisted in STATE_DIR, fail the way a
// store does, or recover. The faults are real failures of those stores, not
// switches in the worker:
//   store-write  triggers make every insert into `events` and `blobs` fail
//                with an SQLite error, so a write's D1 batch fails after its
//                first statements ran (and D1 must roll all of it back);
//   store-read   the `records` table is renamed away, so reads of records
//                fail in D1;
//   blob-store   R2's local blob directory is replaced by a plain file, so
//                R2 can neither store nor read bytes.
// It exits 0 once the fault is in the state asked for; each state can be
// asked for again.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = join(ROOT, "node_modules/.bin/wrangler");
// The bucket in wrangler.toml; miniflare keeps its bytes in this directory.
const BUCKET = "folio-blobs";
// abs() of the smallest integer overflows: an SQLite error, not a constraint
// (which a store could take for a conflict between writes).
const FAIL = "SELECT abs(-9223372036854775808)";
const FAILING_TABLES = ["events", "blobs"];
const AWAY = "folio_fault_records";

function d1(state, sql) {
  const result = spawnSync(
    WRANGLER,
    ["d1", "execute", "DB", "--local", "--env", "dev", "--persist-to", state, "--command", sql],
    {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
    },
  );
  if (result.error || result.status !== 0) {
    throw new Error(`wrangler d1 execute failed (${result.error ?? `exit ${result.status}`}):\n${result.stdout}${result.stderr}`);
  }
  return result.stdout;
}

function tableExists(state, name) {
  const out = d1(state, `SELECT 'present:' || name FROM sqlite_master WHERE type = 'table' AND name = '${name}'`);
  return out.includes(`present:${name}`);
}

const faults = {
  "store-write": {
    on: (state) =>
      d1(
        state,
        FAILING_TABLES.map(
          (table) => `CREATE TRIGGER IF NOT EXISTS folio_fault_${table} AFTER INSERT ON ${table} BEGIN ${FAIL}; END`,
        ).join("; "),
      ),
    off: (state) => d1(state, FAILING_TABLES.map((table) => `DROP TRIGGER IF EXISTS folio_fault_${table}`).join("; ")),
  },
  "store-read": {
    on: (state) => tableExists(state, "records") && d1(state, `ALTER TABLE records RENAME TO ${AWAY}`),
    off: (state) => tableExists(state, AWAY) && d1(state, `ALTER TABLE ${AWAY} RENAME TO records`),
  },
  "blob-store": {
    on: (state) => {
      const blobs = join(state, "v3/r2", BUCKET, "blobs");
      if (existsSync(blobs) && statSync(blobs).isFile()) return;
      mkdirSync(dirname(blobs), { recursive: true });
      if (existsSync(blobs)) renameSync(blobs, `${blobs}.away`);
      writeFileSync(blobs, "not a directory: e2e/worker-fault.mjs\n");
    },
    off: (state) => {
      const blobs = join(state, "v3/r2", BUCKET, "blobs");
      if (existsSync(blobs) && statSync(blobs).isFile()) rmSync(blobs);
      if (existsSync(`${blobs}.away`)) renameSync(`${blobs}.away`, blobs);
    },
  },
};

const [state, fault, wanted] = process.argv.slice(2);
if (!state || !faults[fault] || !["on", "off"].includes(wanted)) {
  console.error(`usage: node e2e/worker-fault.mjs STATE_DIR (${Object.keys(faults).join("|")}) (on|off)`);
  process.exit(2);
}
try {
  faults[fault][wanted](state);
} catch (error) {
  console.error(`worker-fault: ${fault} ${wanted}: ${error.message}`);
  process.exit(1);
}
