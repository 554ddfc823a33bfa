// What the browser test runs against: a real `folio serve` on 127.0.0.1:443
// (built by cargo, provisioned by the CLI in a fresh data directory), a node
// HTTPS client signing with the app page's own signer, a plain-HTTP server for
// the app page, and headless Chromium from Debian's package.
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { signedHeaders } from "./app/signer.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const APP_DIR = fileURLToPath(new URL("./app/", import.meta.url));
export const CHROMIUM = "/usr/bin/chromium";

/** Builds the `folio` binary (a no-op when it is fresh) and returns its path. */
export function buildFolio() {
  const built = spawnSync(
    "cargo",
    // `--bins --tests`: the crates and features of `cargo test`, whose builds it reuses.
    ["build", "--bins", "--tests", "--message-format=json-render-diagnostics"],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
  );
  if (built.status !== 0) throw new Error(`cargo build --bins --tests failed:\n${built.stderr}`);
  for (const line of built.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line);
    // The binary itself, not its unit tests' harness (`profile.test`).
    if (message.reason === "compiler-artifact" && message.target?.name === "folio" && message.executable &&
      !message.profile?.test) {
      return message.executable;
    }
  }
  throw new Error("cargo build named no folio executable");
}

/** Runs a `folio` subcommand that prints JSON; returns it parsed. */
export function folioJson(bin, args) {
  const run = spawnSync(bin, args, { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`folio ${args.join(" ")} failed (${run.status}):\n${run.stderr}`);
  return JSON.parse(run.stdout);
}

/** Fails with a clear message unless this process may listen on `host:port`. */
async function ensureBindable(host, port) {
  const probe = net.createServer();
  probe.listen(port, host);
  try {
    await once(probe, "listening");
  } catch (error) {
    const why = {
      EACCES: "permission denied: binding a port below 1024 needs root (CI runs as root)",
      EADDRINUSE: "the address is in use: something else listens there",
    }[error.code] ?? error.message;
    throw new Error(`the browser test needs to listen on ${host}:${port}: ${why}`);
  }
  probe.close();
  await once(probe, "close");
}

/**
 * `folio serve` on `address`:443 (127.0.0.1 unless told), HTTPS only,
 * answering for `baseUrl`, with `args` besides. Resolves once it listens;
 * `stop()` ends it; `log()` is its output so far.
 */
export async function startFolio({ bin, dataDir, baseUrl, address = "127.0.0.1", args = [] }) {
  await ensureBindable(address, 443);
  const child = spawn(
    bin,
    ["serve", "--data-dir", dataDir, "--listen", `${address}:443`, "--http-listen", "off", "--base-url", baseUrl, ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  // Its output, both streams interleaved; it says `folio: listening on …` once bound.
  let output = "";
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`folio serve did not start within 30 s:\n${output}`)), 30_000);
    const collect = (chunk) => {
      output = (output + chunk).slice(-200_000);
      if (output.includes("folio: listening on")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`folio serve exited (${code ?? signal}) before listening on ${address}:443:\n${output}`));
    });
  });
  return {
    log: () => output,
    async stop() {
      process.off("exit", killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * One HTTPS request to the local server for `url`'s host name (SNI and Host
 * carry it; the connection goes to 127.0.0.1), accepting its self-signed
 * certificate. Answers `{status, headers, text, json}`.
 */
export function httpsRequest(method, url, { headers = {}, body } = {}) {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const request = https.request(
      {
        host: "127.0.0.1",
        port: target.port || 443,
        servername: target.hostname,
        method,
        path: target.pathname + target.search,
        headers: { host: target.host, ...headers },
        rejectUnauthorized: false,
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk) => (text += chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode, headers: response.headers, text, json: () => JSON.parse(text) }),
        );
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

/** An authorized app (e.g. the full-access one `folio app add` made) signing from node. */
export class SignedClient {
  constructor({ appId, authorizationId, key }) {
    Object.assign(this, { appId, authorizationId, key });
  }

  async request(method, url, body) {
    const headers = await signedHeaders({
      key: this.key, appId: this.appId, authorizationId: this.authorizationId, method, url,
    });
    if (body !== undefined) headers["content-type"] = "application/json";
    return httpsRequest(method, url, { headers, body: body === undefined ? undefined : JSON.stringify(body) });
  }

  /** A JSON answer that must be 200. */
  async ok(method, url, body) {
    const response = await this.request(method, url, body);
    if (response.status !== 200) throw new Error(`${method} ${url}: ${response.status} ${response.text}`);
    return response.json();
  }
}

const CONTENT_TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8" };

/** Serves the app page's files over plain HTTP on 127.0.0.1 (a secure context). */
export async function serveApp() {
  const server = http.createServer((request, response) => {
    const path = new URL(request.url, "http://x").pathname;
    const file = path === "/" ? "index.html" : path.slice(1);
    const full = join(APP_DIR, file);
    if (request.method !== "GET" || file.includes("/") || !CONTENT_TYPES[extname(file)] || !existsSync(full)) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    response.writeHead(200, { "content-type": CONTENT_TYPES[extname(file)], "cache-control": "no-store" });
    response.end(readFileSync(full));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Debian's Chromium, headless, with ../shared/TOOLCHAIN.md §5's flags; every
 * `*.test` host name resolves to 127.0.0.1 unless `hostRules` (Chromium's
 * `--host-resolver-rules`) says otherwise. Playwright gives each launch a
 * fresh, empty --user-data-dir of its own (and each context fresh cookies
 * and storage).
 */
export async function launchChromium({ hostRules = "MAP *.test 127.0.0.1" } = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium chromium-driver)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // The server's certificate is self-signed: tests only.
      "--ignore-certificate-errors",
      `--host-resolver-rules=${hostRules}`,
    ],
  });
}

/** A 240×120 PNG drawn by the page itself: a band of `colour` over a yellow one. */
export async function drawnPng(page, colour) {
  const base64 = await page.evaluate(async (colour) => {
    const canvas = new OffscreenCanvas(240, 120);
    const context = canvas.getContext("2d");
    context.fillStyle = colour;
    context.fillRect(0, 0, 240, 120);
    context.fillStyle = "#f2b705";
    context.fillRect(0, 80, 240, 40);
    const bytes = new Uint8Array(await (await canvas.convertToBlob({ type: "image/png" })).arrayBuffer());
    return btoa(String.fromCharCode(...bytes));
  }, colour);
  return Buffer.from(base64, "base64");
}
