// Browser end-to-end test of the app consent flow (PROTOCOL.md §10): headless
// Chromium loads a test app page (app/), which discovers alice.test's server,
// registers, and sends the user to the consent page of a real `folio serve`;
// the test signs in there and approves or denies, and the app page, back
// from the redirect, makes a signed request. Screenshots of the sign-in and
// consent pages go to target/browser-artifacts/.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKey, exportPublicKey, newRecordId } from "./app/signer.js";
import {
  ROOT, buildFolio, folioJson, startFolio, httpsRequest, SignedClient, serveApp, launchChromium,
} from "./harness.mjs";

const ENTITY = "alice.test";
const BASE = `https://${ENTITY}`;
const API = `${BASE}/api/alice`;
const TYPE_TYPE = "4f1f0a1c9a6b4d0e8a3c2b7d5e6f7a81";
const APP_AUTHORIZATION_TYPE = "9b8c7d6e5f4a4b3c8d2e1f0a9b8c7d63";
const ARTIFACTS = join(ROOT, "target", "browser-artifacts");
const NOTE_TITLE = "Written before the app existed";
const TIMEOUT = { timeout: 90_000 };

let dataDir, folio, app, browser, password, full, noteType, note;

before(async () => {
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  console.log(`browser test: screenshots go to ${ARTIFACTS}`);
  const bin = buildFolio();
  dataDir = mkdtempSync(join(tmpdir(), "folio-browser-"));
  const dir = ["--data-dir", dataDir];
  ({ password } = folioJson(bin, ["user", "add", "alice", "--entity", ENTITY, "--base-url", BASE, "--json", ...dir]));
  const keys = await generateKey();
  const created = folioJson(bin, [
    "app", "add", "--user", "alice", "--public-key", await exportPublicKey(keys.publicKey), "--full-access", "--json", ...dir,
  ]);
  full = new SignedClient({ appId: created.app_id, authorizationId: created.authorization_id, key: keys.privateKey });
  folio = await startFolio({ bin, dataDir, baseUrl: BASE });

  // A type of the user's and one private record of it: what the app asks to read.
  const typeType = (await full.ok("GET", `${API}/records/system.folio.dev/${TYPE_TYPE}`)).record;
  noteType = (await full.ok("POST", `${API}/records`, {
    id: newRecordId(),
    type: versionLink(typeType),
    content: {
      name: "e2e_note",
      schema: { type: "object", properties: { content: { type: "object", properties: { title: { type: "string" } } } } },
    },
  })).record;
  note = (await full.ok("POST", `${API}/records`, { type: versionLink(noteType), content: { title: NOTE_TITLE } })).record;

  app = await serveApp();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await app?.close();
  await folio?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function versionLink(record) {
  return { entity: record.author.entity, record_id: record.id, version_hash: record.version.hash };
}

/**
 * Runs `body` with a page in a fresh context (no cookies, empty storage); on
 * failure, saves a screenshot and adds the page's console and the server's
 * log tail to the error.
 */
async function withPage(name, body) {
  const context = await browser.newContext();
  context.setDefaultTimeout(20_000);
  const page = await context.newPage();
  const messages = [];
  page.on("console", (message) => messages.push(`[${message.type()}] ${message.text()}`));
  page.on("pageerror", (error) => messages.push(`[pageerror] ${error.message}`));
  try {
    await body(page);
  } catch (error) {
    const shot = join(ARTIFACTS, `${name}-failure.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
    const appError = await page.locator("#error").textContent({ timeout: 1_000 }).catch(() => null);
    error.message +=
      `\n--- at ${page.url()} (screenshot ${shot})` +
      (appError && !error.message.includes(appError) ? `\n--- the app page's error: ${appError}` : "") +
      `\n--- browser console:\n${messages.join("\n")}` +
      `\n--- folio serve log (tail):\n${folio.log().slice(-4_000)}`;
    throw error;
  } finally {
    await context.close();
  }
}

/** The app page, connected to alice.test: it registers and lands on the sign-in page. */
async function connect(page) {
  await page.goto(`${app.origin}/?type=${noteType.id}`);
  await page.getByLabel("Entity").fill(ENTITY);
  await page.getByRole("button", { name: "Connect" }).click();
  // The app page shows what went wrong (discovery, registration) in #error: fail at once on it.
  const appError = page.locator("#error:not([hidden])");
  await Promise.race([
    page.waitForURL(new RegExp(`^${BASE}/alice/auth/[0-9a-f]{32}$`)),
    appError.waitFor().then(async () => {
      throw new Error(`the app page failed: ${await appError.textContent()}`);
    }),
  ]);
  await page.getByLabel("Password").waitFor();
  return page.url().split("/").pop();
}

async function signIn(page, withPassword) {
  await page.getByLabel("Password").fill(withPassword);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Waits until the browser is back on the app page. */
async function backOnApp(page) {
  await page.waitForURL((url) => url.origin === app.origin);
  return new URL(page.url());
}

test("Chromium reaches https://alice.test through --host-resolver-rules, and WebCrypto has Ed25519", TIMEOUT, async () => {
  await withPage("resolver", async (page) => {
    await page.goto(`${app.origin}/`);
    const seen = await page.evaluate(async () => {
      const response = await fetch("https://alice.test/", { method: "HEAD" });
      const keys = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
      return { status: response.status, link: response.headers.get("link"), algorithm: keys.privateKey.algorithm.name };
    });
    assert.equal(seen.status, 204);
    assert.match(seen.link, /^<https:\/\/alice\.test\/api\/alice\/records\/alice\.test\/[0-9a-f]{32}>; rel="https:\/\/folio\.dev\/rels\/entity-record"$/);
    assert.equal(seen.algorithm, "Ed25519");
  });
});

test("approve: the app registers, the owner signs in and allows, the app's signed request reads the granted type", TIMEOUT, async () => {
  await withPage("approve", async (page) => {
    const appId = await connect(page);
    await page.screenshot({ path: join(ARTIFACTS, "sign-in-page.png"), fullPage: true });
    await signIn(page, password);

    const allow = page.getByRole("button", { name: "Allow" });
    await allow.waitFor();
    assert.match(await page.getByRole("heading", { level: 1 }).textContent(), /Folio test app/);
    const scope = page.getByRole("checkbox", { name: /e2e_note/ });
    assert.ok(await scope.isChecked(), "the requested scope is ticked");
    assert.equal(await scope.getAttribute("name"), "read");
    assert.equal(await scope.getAttribute("value"), `${ENTITY} ${noteType.id}`);
    const consentShot = join(ARTIFACTS, "consent-page.png");
    await page.screenshot({ path: consentShot, fullPage: true });
    console.log(`browser test: consent page screenshot at ${consentShot}`);
    await allow.click();

    const back = await backOnApp(page);
    const authorizationId = back.searchParams.get("authorization_id");
    assert.match(authorizationId ?? "", /^[0-9a-f]{32}$/, `redirected to ${back}`);
    const result = JSON.parse(await page.locator("#result:not([hidden])").textContent());
    assert.equal(result.status, 200, JSON.stringify(result));
    assert.deepEqual(result.body.records.map((record) => [record.id, record.content.title]), [[note.id, NOTE_TITLE]]);

    // What the server stored: the App record (the user's, private) and an
    // App Authorization granting exactly the requested read.
    const appRecord = (await full.ok("GET", `${API}/records/${ENTITY}/${appId}`)).record;
    assert.equal(appRecord.author.entity, ENTITY);
    assert.deepEqual(appRecord.permissions, {});
    assert.equal(appRecord.content.name, "Folio test app");
    const grant = (await full.ok("GET", `${API}/records/${ENTITY}/${authorizationId}`)).record;
    assert.equal(grant.type.record_id, APP_AUTHORIZATION_TYPE);
    assert.equal(grant.content.app.record_id, appId);
    assert.deepEqual(grant.content.scope_grant.read, [{ entity: ENTITY, record_id: noteType.id }]);
  });
});

test("deny: the app is sent back with error=access_denied and no authorization", TIMEOUT, async () => {
  await withPage("deny", async (page) => {
    await connect(page);
    await signIn(page, password);
    await page.getByRole("button", { name: "Deny" }).click();
    const back = await backOnApp(page);
    assert.equal(back.searchParams.get("error"), "access_denied", `redirected to ${back}`);
    assert.equal(back.searchParams.has("authorization_id"), false, `redirected to ${back}`);
    assert.equal(await page.getByRole("alert").textContent(), "Access denied");
  });
});

test("wrong password: the sign-in page says so and nothing redirects", TIMEOUT, async () => {
  await withPage("wrong-password", async (page) => {
    const appId = await connect(page);
    const navigations = [];
    page.on("framenavigated", (frame) => frame === page.mainFrame() && navigations.push(frame.url()));
    const answer = page.waitForResponse((response) => response.request().method() === "POST");
    await signIn(page, `${password}-not`);
    assert.equal((await answer).status(), 401);
    await page.getByRole("alert").filter({ hasText: "Wrong password" }).waitFor();
    assert.equal(page.url(), `${BASE}/alice/auth/${appId}`);
    assert.deepEqual(navigations.filter((url) => !url.startsWith(`${BASE}/`)), [], "left the server's pages");
    assert.equal(await page.getByRole("button", { name: "Allow" }).count(), 0);
    assert.ok(await page.getByLabel("Password").isVisible(), "the password field is offered again");
  });
});
