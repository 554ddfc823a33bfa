// What the worker's harnesses share (e2e/worker-conformance.mjs,
// e2e/worker-import.mjs): the repository's paths, running commands and
// wrangler dev with their output kept, free ports, Ed25519 keys, and
// stopping every child process on every way out.
import { spawn, spawnSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const TARGET_DIR = resolve(ROOT, process.env.CARGO_TARGET_DIR ?? "target");
export const WRANGLER = join(ROOT, "node_modules/.bin/wrangler");
const READY_TIMEOUT_MS = 120_000;

// No telemetry, no Request.cf download; the worker is already built.
export const ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_SEND_ERROR_REPORTS: "false",
  DO_NOT_TRACK: "1",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  FOLIO_WORKER_PREBUILT: "1",
};


export class HarnessError extends Error {}

// Child processes to stop on exit: each runs in its own process group
// (wrangler starts workerd), killed as a group.
const running = new Set();

export function stopAll(signal = "SIGTERM") {
  for (const child of running) {
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  }
}

// Stops `child` (spawned `detached`, in a group of its own) on exit too.
export function track(child) {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

process.on("exit", () => stopAll("SIGKILL"));
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]]) {
  process.on(signal, () => {
    stopAll("SIGKILL");
    process.exit(code);
  });
}

// Runs a command to completion; its output is shown only when it fails.
export function run(command, args, { what = `${command} ${args.join(" ")}`, input, cwd = ROOT } = {}) {
  const result = spawnSync(command, args, { cwd, env: ENV, encoding: "utf8", input, maxBuffer: 64 << 20 });
  if (result.error || result.status !== 0) {
    throw new HarnessError(
      `${what} failed (${result.error ?? `exit ${result.status}`}):\n${result.stdout ?? ""}${result.stderr ?? ""}`,
    );
  }
  return result;
}


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

// A new Ed25519 key: the seed and the public key, standard base64.
export function keyPair() {
  const { privateKey } = generateKeyPairSync("ed25519");
  const jwk = privateKey.export({ format: "jwk" });
  const base64 = (text) => Buffer.from(text, "base64url").toString("base64");
  return { seed: base64(jwk.d), publicKey: base64(jwk.x) };
}

export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch {
    throw new HarnessError(`${what} did not print one JSON object:\n${text}`);
  }
}

// wrangler dev on `port` with local state in `state`, its output in `log`,
// and `vars` (name: value) set; resolves once it answers HTTP.
export async function startWrangler(state, port, log, vars = {}) {
  const out = openSync(log, "a");
  const child = spawn(
    WRANGLER,
    [
      "dev", "--env", "dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", state,
      ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ],
    { cwd: ROOT, env: ENV, detached: true, stdio: ["ignore", out, out] },
  );
  closeSync(out);
  running.add(child);
  let exited = null;
  child.once("exit", (code, signal) => {
    exited = signal ?? `exit ${code}`;
    running.delete(child);
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (exited) {
      throw new HarnessError(`wrangler dev stopped (${exited}) before answering:\n${tail(log)}`);
    }
    try {
      await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2_000) });
      return child;
    } catch {
      await new Promise((wake) => setTimeout(wake, 250));
    }
  }
  throw new HarnessError(`wrangler dev did not answer in ${READY_TIMEOUT_MS / 1000} s:\n${tail(log)}`);
}

// Stops wrangler dev (and its workerd) and waits until it has exited.
export async function stopWrangler(child) {
  if (!running.has(child)) return;
  const gone = new Promise((done) => child.once("exit", done));
  process.kill(-child.pid, "SIGTERM");
  const timer = setTimeout(() => running.has(child) && process.kill(-child.pid, "SIGKILL"), 10_000);
  await gone;
  clearTimeout(timer);
}

export function tail(file, lines = 40) {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").slice(-lines).join("\n") : "";
}

// Runs a program to completion with its output shown; resolves to its exit code.
export function runShown(command, args) {
  return new Promise((resolveCode, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: ENV, detached: true, stdio: "inherit" });
    running.add(child);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      running.delete(child);
      resolveCode(code ?? (signal ? 128 : 1));
    });
  });
}

