// The SDK as an app developer gets it (issue 43, item 3): `npm pack` in
// clients/js, `npm install` of that tarball in an empty folder outside the
// repository, and the README's own example, taken from README.md and run
// unchanged but for what the README says to fill in (the app's ids, the
// server's URL), against a fresh `folio serve`. Run twice, it leaves one
// `note` type and two notes.
//
//   node --test e2e/sdk-install.test.mjs    # after the SDK's `npm run build`
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, buildFolio, folioJson } from "./browser/harness.mjs";
import { freePort } from "./wrangler.mjs";

const SDK = join(ROOT, "clients/js");
let dir;
let server;
let baseUrl;
let dataDir;
let bin;

/** Runs `command` in `cwd`; its stdout, or a failure with both streams. */
function run(command, args, { cwd, env = process.env } = {}) {
  const done = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout: 300_000 });
  if (done.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${done.status ?? done.signal}):\n${done.stdout}\n${done.stderr}`);
  }
  return done.stdout;
}

/** The README's fenced block of `language` that contains `marker`. */
function readmeBlock(language, marker) {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const blocks = [...readme.matchAll(new RegExp("```" + language + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);
  const block = blocks.find((text) => text.includes(marker));
  if (!block) throw new Error(`README.md has no \`\`\`${language} block with ${marker}`);
  return block;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "folio-sdk-install-"));
  bin = buildFolio();
  dataDir = join(dir, "folio-data");
  const port = await freePort();
  baseUrl = `https://localhost:${port}`;
  server = spawn(bin, ["serve", "--data-dir", dataDir, "--listen", `127.0.0.1:${port}`, "--http-listen", "off", "--base-url", baseUrl], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`folio serve did not start:\n${output}`)), 30_000);
    const collect = (chunk) => {
      output += chunk;
      if (output.includes("folio: listening on")) {
        clearTimeout(timer);
        resolve();
      }
    };
    server.stdout.on("data", collect);
    server.stderr.on("data", collect);
    server.on("exit", (code) => reject(new Error(`folio serve exited (${code}):\n${output}`)));
  });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = once(server, "exit");
    server.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the packed SDK installs in an empty folder and runs the README's example", async () => {
  // The README's build line ends in `npm pack`; the tarball goes to the scratch folder here.
  const packed = join(dir, "pack");
  mkdirSync(packed);
  run("npm", ["pack", "--silent", "--pack-destination", packed], { cwd: SDK });
  const [tarball] = readdirSync(packed).filter((name) => name.endsWith(".tgz"));
  assert.ok(tarball, "npm pack wrote a tarball");
  const listing = run("tar", ["-tzf", join(packed, tarball)]);
  for (const file of ["package/src/index.js", "package/src/index.d.ts", "package/pkg/folio_core_bg.wasm"]) {
    assert.ok(listing.includes(file), `the package holds ${file}:\n${listing}`);
  }

  const app = join(dir, "my-app");
  mkdirSync(app);
  run("npm", ["install", "--no-audit", "--no-fund", "--silent", join(packed, tarball)], { cwd: app });

  // The README's key line, as written, in the app's folder.
  const keyLine = readmeBlock("sh", "AppKey.inFile").split("\n").filter((line) => line.startsWith("node -e") || line.startsWith("  const key"));
  const keyScript = keyLine.join("\n").replace(/#.*$/m, "").trim();
  const publicKey = run("sh", ["-c", keyScript], { cwd: app }).trim();
  assert.match(publicKey, /^[A-Za-z0-9+/]{43}=$/, "a public key");
  const added = folioJson(bin, ["app", "add", "--data-dir", dataDir, "--user", "me", "--public-key", publicKey, "--full-access", "--json"]);

  const example = readmeBlock("js", "ensureType")
    .replace("<app_id>", added.app_id)
    .replace("<authorization_id>", added.authorization_id)
    .replace("https://localhost:8443", baseUrl);
  writeFileSync(join(app, "app.mjs"), example);
  const env = { ...process.env, NODE_EXTRA_CA_CERTS: join(dataDir, "tls/cert.pem") };

  // Twice: the second run finds the type the first made.
  for (const notes of [1, 2]) {
    const child = spawn("node", ["app.mjs"], { cwd: app, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const listed = () => (stdout.match(/Hello again/g) ?? []).length;
    const deadline = Date.now() + 60_000;
    while (listed() < notes && child.exitCode === null && Date.now() < deadline) {
      await new Promise((wake) => setTimeout(wake, 100));
    }
    // It is subscribed now, waiting for changes: the example's last line.
    assert.equal(child.exitCode, null, `the example stopped early:\n${stdout}\n${stderr}`);
    assert.equal(listed(), notes, `run ${notes} listed:\n${stdout}\n${stderr}`);
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    await exited;
  }
  // Types from `folio schema typescript`, checked by tsc against the installed package.
  const typeFile = join(app, "note.json");
  writeFileSync(typeFile, JSON.stringify({ name: "note", schema: { type: "object", properties: {
    content: { type: "object", properties: { title: { type: "string", max_length: 200 } } } } } }));
  writeFileSync(join(app, "note.ts"), run(bin, ["schema", "typescript", typeFile]));
  writeFileSync(join(app, "use.ts"), [
    'import type { Note } from "./note.js";',
    'import { Folio } from "folio-client";',
    "export async function title(folio: Folio, id: string): Promise<string> {",
    "  const note: Note = await folio.records.get(id);",
    "  return note.content?.title ?? \"\";",
    "}",
    "",
  ].join("\n"));
  const tsc = join(SDK, "node_modules/.bin/tsc");
  run(tsc, ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "use.ts"], { cwd: app });

  const refused = spawnSync(bin, ["app", "add", "--data-dir", dataDir, "--user", "me", "--public-key", publicKey, "--scope", "read=note", "--json"], {
    encoding: "utf8",
  });
  assert.equal(refused.status, 0, `one type named note, so --scope read=note names it:\n${refused.stderr}`);
});
