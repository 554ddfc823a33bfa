// `npm test`: runs the SDK's tests under `node --test`. The unit tests need
// nothing; the others start their own `folio serve` (test/server.mjs),
// all with one self-signed certificate made here, which node is told to
// trust (NODE_EXTRA_CA_CERTS must be set before node starts).
//
// The folio binary is FOLIO_BIN, else the workspace's debug build
// (`cargo build --bin folio` first; CARGO_TARGET_DIR is honoured).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PEER_ENTITY } from "./server.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const targetDir = resolve(here, "../../..", process.env.CARGO_TARGET_DIR ?? "target");
const folio = process.env.FOLIO_BIN ?? join(targetDir, "debug/folio");
if (!existsSync(folio)) {
  console.error(`test/run.mjs: no folio binary at ${folio}; build it (cargo build --bin folio) or set FOLIO_BIN`);
  process.exit(2);
}

// A server's first start writes a self-signed certificate for localhost
// and its base URL's host: here the second server's entity in two-server
// tests (test/server.mjs PEER_ENTITY), so that servers find each other.
const certDir = mkdtempSync(join(tmpdir(), "folio-sdk-cert-"));
const made = spawnSync(
  "sh",
  ["-c", `"$0" --data-dir "$1" serve --listen 127.0.0.1:0 --http-listen off --base-url "https://$2" & pid=$!
   for i in $(seq 1 100); do [ -s "$1/tls/key.pem" ] && break; sleep 0.1; done; kill $pid; wait $pid 2>/dev/null; true`,
  folio, certDir, PEER_ENTITY],
  { encoding: "utf8" },
);
const cert = join(certDir, "tls/cert.pem");
const key = join(certDir, "tls/key.pem");
if (!existsSync(cert) || !existsSync(key)) {
  console.error(`test/run.mjs: folio serve wrote no certificate:\n${made.stdout}${made.stderr}`);
  process.exit(2);
}

// The declarations `folio schema typescript` writes for the real apps'
// types must compile against the SDK's, as must an app's use of the SDK.
const generated = join(here, "types/generated");
rmSync(generated, { recursive: true, force: true });
mkdirSync(generated);
const realTypes = resolve(here, "../../../../shared/real-types");
for (const name of readdirSync(realTypes).filter((file) => file.endsWith(".json"))) {
  const result = spawnSync(folio, ["schema", "typescript", join(realTypes, name)], { encoding: "utf8" });
  if (result.status !== 0) {
    console.error(`test/run.mjs: folio schema typescript ${name} failed:\n${result.stdout}${result.stderr}`);
    process.exit(1);
  }
  writeFileSync(join(generated, name.replace(/\.json$/, ".ts")), result.stdout);
}
const tsc = spawnSync(process.execPath, [resolve(here, "../node_modules/typescript/bin/tsc"), "-p", join(here, "types")], {
  stdio: "inherit",
});
if (tsc.status !== 0) {
  console.error("test/run.mjs: the type declarations do not compile (see above)");
  process.exit(1);
}

const files = readdirSync(here).filter((name) => name.endsWith(".test.mjs")).map((name) => join(here, name));
const child = spawn(process.execPath, ["--test", ...process.argv.slice(2), ...files], {
  stdio: "inherit",
  env: { ...process.env, NODE_EXTRA_CA_CERTS: cert, FOLIO_BIN: folio, FOLIO_TLS_CERT: cert, FOLIO_TLS_KEY: key },
});
child.on("exit", (code, signal) => {
  rmSync(certDir, { recursive: true, force: true });
  process.exit(code ?? (signal ? 1 : 0));
});
