// Sequential create and list round trips from node with the SDK, next to the
// Rust client's (clients/rust/examples/roundtrip.rs), against one release
// `folio serve` on this machine: each client makes COUNT creates, then COUNT
// lists of 20, one at a time on one connection. Not part of the tests.
//
//   cargo build --release --bin folio -p folio-client --example roundtrip
//   (cd clients/js && npm run build)
//   NODE_EXTRA_CA_CERTS is set by this script for its own child; run:
//   node clients/js/bench/roundtrip.mjs [COUNT]      (default 2000)
import { spawn, spawnSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const release = join(root, process.env.CARGO_TARGET_DIR ?? "target", "release");
const count = Number(process.argv[2] ?? 2000);
// FOLIO_ROUNDTRIP_PROFILE=DIR writes the node side's CPU profile there (node --cpu-prof).
const profile = process.env.FOLIO_ROUNDTRIP_PROFILE
  ? ["--cpu-prof", `--cpu-prof-dir=${process.env.FOLIO_ROUNDTRIP_PROFILE}`]
  : [];

if (process.env.FOLIO_ROUNDTRIP_CHILD) {
  // The node side, in a child that trusts the server's certificate.
  const { AppKey, Folio, versionLink } = await import("../src/index.js");
  const { baseUrl, appId, authorizationId, seed } = JSON.parse(process.env.FOLIO_ROUNDTRIP_CHILD);
  const folio = await Folio.connect({ entity: baseUrl, app: { appId, authorizationId, key: await AppKey.fromSeed(seed) } });
  const type = versionLink(await folio.records.create({
    type: await folio.records.builtinType("type"),
    content: { name: `roundtrip_${Date.now()}`, schema: { type: "object", properties: { content: { type: "object", properties: { n: { type: "int" } } } } } },
  }));
  let started = performance.now();
  for (let n = 0; n < count; n += 1) await folio.records.create({ type, content: { n } });
  const creates = count / ((performance.now() - started) / 1000);
  started = performance.now();
  for (let n = 0; n < count; n += 1) await folio.records.page({ pageSize: 20 });
  const lists = count / ((performance.now() - started) / 1000);
  console.log(JSON.stringify({ type, creates_per_s: Math.round(creates), lists_per_s: Math.round(lists) }));
  process.exit(0);
}

const data = mkdtempSync(join(tmpdir(), "folio-roundtrip-"));
const folioBin = join(release, "folio");
const cli = (args) => {
  const run = spawnSync(folioBin, ["--data-dir", data, ...args], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`folio ${args.join(" ")}: ${run.stderr}`);
  return JSON.parse(run.stdout);
};
const port = 18000 + Math.floor(Math.random() * 2000);
const baseUrl = `https://localhost:${port}`;
cli(["user", "add", "me", "--entity", "localhost", "--base-url", baseUrl, "--json"]);
const { privateKey } = generateKeyPairSync("ed25519");
const jwk = privateKey.export({ format: "jwk" });
const b64 = (text) => Buffer.from(text, "base64url").toString("base64");
const seed = b64(jwk.d);
const app = cli(["app", "add", "--user", "me", "--public-key", b64(jwk.x), "--full-access", "--json"]);
// The app's write rate is switched off, as the load tool does: this measures round trips, not the limit.
const server = spawn(folioBin, ["--data-dir", data, "serve", "--listen", `127.0.0.1:${port}`, "--http-listen", "off", "--base-url", baseUrl, "--write-rate", "off"], {
  stdio: ["ignore", "ignore", "pipe"],
  env: { ...process.env, RUST_LOG: "warn" },
});
await new Promise((ready) => server.stderr.on("data", (chunk) => String(chunk).includes("listening on") && ready()));
try {
  const credentials = { baseUrl, appId: app.app_id, authorizationId: app.authorization_id, seed };
  const node = spawnSync(process.execPath, [...profile, fileURLToPath(import.meta.url), String(count)], {
    encoding: "utf8",
    env: { ...process.env, NODE_EXTRA_CA_CERTS: join(data, "tls/cert.pem"), FOLIO_ROUNDTRIP_CHILD: JSON.stringify(credentials) },
  });
  if (node.status !== 0) throw new Error(`the node side failed:\n${node.stderr}`);
  const nodeResult = JSON.parse(node.stdout);
  const rust = spawnSync(join(release, "examples/roundtrip"), [
    baseUrl, join(data, "tls/cert.pem"), app.app_id, app.authorization_id, seed, JSON.stringify(nodeResult.type), String(count),
  ], { encoding: "utf8" });
  if (rust.status !== 0) throw new Error(`the Rust side failed:\n${rust.stderr}`);
  const rustResult = JSON.parse(rust.stdout);
  console.log(`sequential round trips, ${count} each, one connection, folio serve (release) on this machine:`);
  console.log(`  node SDK:    ${nodeResult.creates_per_s} creates/s, ${nodeResult.lists_per_s} lists/s (20 records a page)`);
  console.log(`  Rust client: ${rustResult.creates_per_s} creates/s, ${rustResult.lists_per_s} lists/s`);
} finally {
  server.kill("SIGTERM");
  await new Promise((done) => server.once("exit", done));
  rmSync(data, { recursive: true, force: true });
}
