// A `folio serve` of its own for a test file: a fresh data directory, the
// user `me` (entity `localhost`, or another), a full-access app made with
// `folio app add`, on a free port, with the certificate test/run.mjs made.
import { spawn, spawnSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppKey } from "../src/index.js";

const folio = process.env.FOLIO_BIN;

/**
 * The entity of a second test server's user: the certificate test/run.mjs
 * made names it besides `localhost`, so that two servers can find each
 * other (see `peerArgs`).
 */
export const PEER_ENTITY = "peer.localhost";

/** A port nobody listens on right now. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

function cli(data, args) {
  const result = spawnSync(folio, ["--data-dir", data, ...args], { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`folio ${args.join(" ")}: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** A new app key pair: the seed and public key, standard base64. */
function keyPair() {
  const { privateKey } = generateKeyPairSync("ed25519");
  const jwk = privateKey.export({ format: "jwk" });
  const standard = (text) => Buffer.from(text, "base64url").toString("base64");
  return { seed: standard(jwk.d), publicKey: standard(jwk.x) };
}

/**
 * `folio serve` settings for a server that talks to another test server on
 * `port`, whose user is at `entity`: both certificates are test/run.mjs's,
 * and `localhost` (where every test server's endpoints are) leads to `port`.
 * Each server reaches the other only, so the two pair up: one with
 * `peerArgs(PEER_ENTITY, itsPort)`, the other at PEER_ENTITY with
 * `peerArgs("localhost", thisPort)`.
 */
export function peerArgs(entity, port) {
  const rules = new Set([`localhost=127.0.0.1:${port}`, `${entity}=127.0.0.1:${port}`]);
  return ["--peer-ca", process.env.FOLIO_TLS_CERT, ...[...rules].flatMap((rule) => ["--peer-resolve", rule])];
}

/**
 * Starts a server (`serveArgs` go to `folio serve`) on `port` (default: a
 * free one) for the user `user` at `entity`; `stop()` ends it and removes
 * its data.
 */
export async function startServer({ serveArgs = [], port, user: name = "me", entity = "localhost" } = {}) {
  if (!folio || !process.env.FOLIO_TLS_CERT) {
    throw new Error("run the SDK's tests with `npm test` (test/run.mjs), which starts servers for them");
  }
  const data = mkdtempSync(join(tmpdir(), "folio-sdk-test-"));
  port ??= await freePort();
  const baseUrl = `https://localhost:${port}`;
  const user = cli(data, ["user", "add", name, "--entity", entity, "--base-url", baseUrl, "--json"]);
  const pair = keyPair();
  const app = cli(data, ["app", "add", "--user", name, "--public-key", pair.publicKey, "--full-access", "--json"]);
  const launch = async () => {
    const child = spawn(
      folio,
      ["--data-dir", data, "serve", "--listen", `127.0.0.1:${port}`, "--http-listen", "off", "--base-url", baseUrl, ...serveArgs],
      { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, RUST_LOG: "warn" } },
    );
    let log = "";
    await new Promise((ready, failed) => {
      child.stderr.on("data", (chunk) => {
        log += chunk;
        if (log.includes("listening on https://")) ready();
      });
      child.once("exit", (code) => failed(new Error(`folio serve exited (${code}):\n${log}`)));
    });
    return child;
  };
  const halt = async (child, signal) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((done) => child.once("exit", done));
    child.kill(signal);
    await gone;
  };
  let child = await launch();
  return {
    baseUrl,
    entityUrl: baseUrl,
    password: user.password,
    app: {
      appId: app.app_id,
      authorizationId: app.authorization_id,
      key: await AppKey.fromSeed(pair.seed),
    },
    /** Kills the server (SIGKILL, as a crash would); `start()` brings it back on the same data. */
    async kill() {
      await halt(child, "SIGKILL");
    },
    async start() {
      child = await launch();
    },
    async stop() {
      await halt(child, "SIGTERM");
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/**
 * A Type record named `name` whose content has these `properties` (schema
 * nodes by name), created by `folio`'s app; its version link.
 */
export async function newType(folio, name, properties) {
  const { versionLink } = await import("../src/index.js");
  const type = await folio.records.create({
    type: await folio.records.builtinType("type"),
    content: { name, schema: { type: "object", properties: { content: { type: "object", properties } } } },
  });
  return versionLink(type);
}
