// The conformance suite's fault hook for the edge host under `wrangler dev`
// (e2e/worker-conformance.mjs passes it as the target's `fault_hook`; see
// conformance/src/faults.rs for the faults themselves):
//
//   node e2e/worker-fault.mjs STATE_DIR sql STATEMENTS
//   node e2e/worker-fault.mjs STATE_DIR blob-store on|off
//
// makes wrangler's local D1 or R2, persisted in STATE_DIR, fail the way a
// store does, or recover. `sql` runs the suite's statements on local D1
// (triggers that fail writes inside their batch, a table renamed away);
// `blob-store on` replaces R2's local blob directory by a plain file, so R2
// can neither store nor read bytes, and `off` puts it back. These are real
// failures of those stores, not switches in the worker. It exits 0 once
// done.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = join(ROOT, "node_modules/.bin/wrangler");
// The bucket in wrangler.toml; miniflare keeps its bytes in this directory.
const BUCKET = "folio-blobs";

function sql(state, statements) {
  const result = spawnSync(
    WRANGLER,
    ["d1", "execute", "DB", "--local", "--env", "dev", "--persist-to", state, "--command", statements],
    {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
    },
  );
  if (result.error || result.status !== 0) {
    throw new Error(`wrangler d1 execute failed (${result.error ?? `exit ${result.status}`}):\n${result.stdout}${result.stderr}`);
  }
}

function blobStore(state, failing) {
  const blobs = join(state, "v3/r2", BUCKET, "blobs");
  const isFile = existsSync(blobs) && statSync(blobs).isFile();
  if (failing && !isFile) {
    mkdirSync(dirname(blobs), { recursive: true });
    if (existsSync(blobs)) renameSync(blobs, `${blobs}.away`);
    writeFileSync(blobs, "not a directory: e2e/worker-fault.mjs\n");
  } else if (!failing) {
    if (isFile) rmSync(blobs);
    if (existsSync(`${blobs}.away`)) renameSync(`${blobs}.away`, blobs);
  }
}

const [state, what, argument] = process.argv.slice(2);
try {
  if (state && what === "sql" && argument) {
    sql(state, argument);
  } else if (state && what === "blob-store" && ["on", "off"].includes(argument)) {
    blobStore(state, argument === "on");
  } else {
    console.error("usage: node e2e/worker-fault.mjs STATE_DIR (sql STATEMENTS | blob-store on|off)");
    process.exit(2);
  }
} catch (error) {
  console.error(`worker-fault: ${what}: ${error.message}`);
  process.exit(1);
}
