// The example app (examples/notes) in headless Chromium against a real
// `folio serve`: connect to alice.test, consent on the server's page, add a
// note with an image, see it in a second tab live, edit it there and see
// the change in the first, delete it. Screenshots of each stage go to
// target/browser-artifacts/notes-*.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, buildFolio, drawnPng, folioJson, startFolio, launchChromium } from "./harness.mjs";
import { serve } from "../../examples/notes/serve.mjs";

const ENTITY = "alice.test";
const BASE = `https://${ENTITY}`;
const ARTIFACTS = join(ROOT, "target", "browser-artifacts");
const TIMEOUT = { timeout: 120_000 };

let dataDir, folio, app, browser, password;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const bin = buildFolio();
  dataDir = mkdtempSync(join(tmpdir(), "folio-notes-"));
  const dir = ["--data-dir", dataDir];
  ({ password } = folioJson(bin, ["user", "add", "alice", "--entity", ENTITY, "--base-url", BASE, "--json", ...dir]));
  // What the owner does once, as the app's README says.
  folioJson(bin, ["type", "add", "--user", "alice", "--json", join(ROOT, "examples/notes/note-type.json"), ...dir]);
  folio = await startFolio({ bin, dataDir, baseUrl: BASE });
  app = await serve(0);
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await app?.close();
  await folio?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A page whose console and errors are kept, to explain a failure. */
async function openPage(context, messages) {
  const page = await context.newPage();
  page.on("console", (message) => messages.push(`[${message.type()}] ${message.text()}`));
  page.on("pageerror", (error) => messages.push(`[pageerror] ${error.message}`));
  return page;
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `notes-${name}.png`), fullPage: true });

test("Notes: connect, consent, add a note with an image, follow it live in a second tab, edit, delete", TIMEOUT, async () => {
  const context = await browser.newContext();
  context.setDefaultTimeout(20_000);
  const messages = [];
  const first = await openPage(context, messages);
  try {
    await first.goto(`${app.origin}/`);
    await first.getByLabel("Your entity").fill(ENTITY);
    await shot(first, "1-connect");
    await first.getByRole("button", { name: "Connect" }).click();

    // The server's own pages: sign in, then allow.
    await first.waitForURL(new RegExp(`^${BASE}/alice/auth/[0-9a-f]{32}$`));
    await first.getByLabel("Password").fill(password);
    await first.getByRole("button", { name: "Sign in" }).click();
    await first.getByRole("button", { name: "Allow" }).waitFor();
    assert.match(await first.getByRole("heading", { level: 1 }).textContent(), /Notes/);
    await shot(first, "2-consent");
    await first.getByRole("button", { name: "Allow" }).click();

    // Back on the app, connected.
    await first.waitForURL((url) => url.origin === app.origin);
    await first.getByText("No notes yet.").waitFor();
    assert.equal(await first.locator("#who").textContent(), ENTITY);

    // A note with an image.
    await first.getByLabel("Title").fill("Groceries");
    await first.getByLabel("Text").fill("Apples, bread");
    const png = await drawnPng(first, "#2457c5");
    await first.getByLabel("Image").setInputFiles({ name: "bands.png", mimeType: "image/png", buffer: png });
    await first.getByRole("button", { name: "Add note" }).click();
    const note = first.locator(".note", { hasText: "Groceries" });
    await note.waitFor();
    const image = note.locator("img.note-image");
    await image.waitFor();
    await first.waitForFunction((img) => img.complete && img.naturalWidth === 240, await image.elementHandle());
    await shot(first, "3-note-with-image");

    // A second tab: the same browser's key and authorization.
    const second = await openPage(context, messages);
    await second.goto(`${app.origin}/`);
    await second.locator(".note", { hasText: "Groceries" }).waitFor();
    assert.equal(await second.locator("#connect").isHidden(), true, "connected, no connect form");

    // Written in the first tab, it arrives in the second as it happens.
    await first.getByLabel("Title").fill("Call the plumber");
    await first.getByRole("button", { name: "Add note" }).click();
    await second.locator(".note", { hasText: "Call the plumber" }).waitFor();
    await shot(second, "4-second-tab-live");

    // Edited in the second tab, the first sees the new version.
    const plumber = second.locator(".note", { hasText: "Call the plumber" });
    await plumber.getByRole("button", { name: "Edit" }).click();
    await second.getByLabel("Title", { exact: true }).last().fill("Call the plumber today");
    await second.getByRole("button", { name: "Save" }).click();
    await first.locator(".note", { hasText: "Call the plumber today" }).waitFor();

    // Deleted in the first tab, gone from the second.
    await first.locator(".note", { hasText: "Groceries" }).getByRole("button", { name: "Delete" }).click();
    await second.locator(".note", { hasText: "Groceries" }).waitFor({ state: "detached" });
    await shot(second, "5-after-delete");
    assert.equal(await first.locator("#error").isHidden(), true, await first.locator("#error").textContent());
  } catch (error) {
    await shot(first, "failure").catch(() => {});
    error.message += `\n--- browser console:\n${messages.join("\n")}\n--- folio serve log (tail):\n${folio.log().slice(-4_000)}`;
    throw error;
  } finally {
    await context.close();
  }
});
