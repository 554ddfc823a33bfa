// Browser end-to-end test of the owner's console (issue 22): headless
// Chromium, no script on any page, against a real `folio serve`. The owner
// signs in, reads the overview, filters, searches and pages records, opens a record
// and a version's differences, edits it (and sees a stale edit refused),
// deletes one, checks a record against a type, revokes an app (whose next
// signed request is refused), changes the password and signs out. Each page
// is saved at desktop width and at 390 px, light and dark, in
// target/browser-artifacts/ as console-<page>-{desktop,390}[-dark].png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKey, exportPublicKey, signedHeaders } from "./app/signer.js";
import { ROOT, buildFolio, folioJson, startFolio, SignedClient, launchChromium, httpsRequest } from "./harness.mjs";

const ENTITY = "alice.test";
const BASE = `https://${ENTITY}`;
const API = `${BASE}/api/alice`;
const CONSOLE = `${BASE}/alice/console`;
const TYPE_TYPE = "4f1f0a1c9a6b4d0e8a3c2b7d5e6f7a81";
const ARTIFACTS = join(ROOT, "target", "browser-artifacts");
const NOTES = 55;
const NEW_PASSWORD = "a new password for the console";

// A 2×2 PNG, red: the record page previews it.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAwMDAxMAAAA4kAQFTjRRLAAAAAElFTkSuQmCC",
  "base64",
);

let dataDir, folio, browser, password, full, victim, noteType, pinned, photo;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const bin = buildFolio();
  dataDir = mkdtempSync(join(tmpdir(), "folio-console-"));
  const dir = ["--data-dir", dataDir];
  ({ password } = folioJson(bin, ["user", "add", "alice", "--entity", ENTITY, "--base-url", BASE, "--json", ...dir]));
  const app = async (name) => {
    const keys = await generateKey();
    const created = folioJson(bin, [
      "app", "add", "--user", "alice", "--name", name, "--public-key", await exportPublicKey(keys.publicKey),
      "--full-access", "--json", ...dir,
    ]);
    return new SignedClient({ appId: created.app_id, authorizationId: created.authorization_id, key: keys.privateKey });
  };
  full = await app("Notes importer");
  victim = await app("Photo sorter");
  folio = await startFolio({ bin, dataDir, baseUrl: BASE });

  const typeType = (await full.ok("GET", `${API}/records/system.folio.dev/${TYPE_TYPE}`)).record;
  noteType = (await full.ok("POST", `${API}/records`, {
    type: versionLink(typeType),
    content: {
      name: "e2e_note",
      schema: {
        type: "object",
        properties: {
          content: {
            type: "object",
            properties: {
              title: { type: "string", max_length: 200 },
              label: { type: "tag_link", optional: true },
              photo: { type: "blob_link", optional: true },
            },
          },
        },
      },
    },
  })).record;
  for (let n = 1; n <= NOTES; n++) {
    await full.ok("POST", `${API}/records`, { type: versionLink(noteType), content: { title: `Note ${n}`, label: "plain" } });
  }
  pinned = (await full.ok("POST", `${API}/records`, {
    type: versionLink(noteType),
    content: { title: "Groceries", label: "pinned" },
  })).record;
  pinned = (await full.ok("PUT", `${API}/records/${ENTITY}/${pinned.id}`, {
    version: { parent_hash: pinned.version.hash },
    content: { title: "Groceries: milk, eggs", label: "pinned" },
  })).record;
  const upload = await httpsRequest("POST", `${API}/blobs`, {
    headers: {
      ...(await signedHeaders({ key: full.key, appId: full.appId, authorizationId: full.authorizationId, method: "POST", url: `${API}/blobs` })),
      "content-type": "image/png",
      "content-length": String(PNG.length),
    },
    body: PNG,
  });
  assert.equal(upload.status, 200, upload.text);
  photo = (await full.ok("POST", `${API}/records`, {
    type: versionLink(noteType),
    content: { title: "A red square", photo: { hash: upload.json().hash, type: "image/png", name: "red.png", size: PNG.length } },
  })).record;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await folio?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function versionLink(record) {
  return { entity: record.author.entity, record_id: record.id, version_hash: record.version.hash };
}

/** The page's background colour, as the browser computed it. */
const background = (page) => page.evaluate(() => getComputedStyle(document.body).backgroundColor);

/**
 * Saves the page at desktop width and at 390 px, in the light scheme and
 * in the dark one (`-dark`), which it must follow (another background).
 */
async function shot(page, name) {
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    const suffix = scheme === "dark" ? "-dark" : "";
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.screenshot({ path: join(ARTIFACTS, `console-${name}-desktop${suffix}.png`), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    // Nothing may be wider than the phone's screen.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(overflow <= 390, `${name}: the page is ${overflow} px wide at 390 px`);
    await page.screenshot({ path: join(ARTIFACTS, `console-${name}-390${suffix}.png`), fullPage: true });
  }
  const dark = await background(page);
  await page.emulateMedia({ colorScheme: "light" });
  assert.notEqual(dark, await background(page), `${name}: the dark scheme has a background of its own`);
  await page.setViewportSize({ width: 1280, height: 900 });
}

test("the owner's console, from signing in to signing out", { timeout: 240_000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(20_000);
  const page = await context.newPage();
  const messages = [];
  page.on("console", (message) => messages.push(`[${message.type()}] ${message.text()}`));
  page.on("pageerror", (error) => messages.push(`[pageerror] ${error.message}`));
  try {
    // A browser at the server's root: what this is, no user named.
    await page.goto(`${BASE}/`);
    await page.getByRole("heading", { name: "This is a Folio server" }).waitFor();
    assert.ok(!(await page.content()).includes("/alice/"), "the landing page names a user");
    await shot(page, "landing");

    // Its form leads to the console by the user name typed.
    await page.getByLabel("Your user name").fill("alice");
    await page.getByRole("button", { name: "Open my console" }).click();
    await page.getByRole("heading", { name: "Sign in to your console" }).waitFor();
    assert.ok(new URL(page.url()).pathname.startsWith("/alice/console"), page.url());

    // Sign in: a wrong password first.
    await page.goto(CONSOLE);
    await page.getByLabel("Password").fill("not the password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "Wrong password" }).waitFor();
    await shot(page, "sign-in");
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in" }).click();

    // The overview.
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    const overview = await page.textContent("main");
    assert.match(overview, /e2e_note/);
    assert.match(overview, new RegExp(`e2e_note\\s*${NOTES + 2}\\s*0`), "the type's count of records");
    assert.match(overview, /Photo sorter/);
    assert.match(overview, /Notes importer/, "the latest versions name the app that wrote them");
    await shot(page, "overview");

    // Records: a type, a filter in the protocol's grammar, then its error.
    await page.getByRole("link", { name: "Records", exact: true }).click();
    await page.getByLabel("Type").selectOption({ label: "e2e_note" });
    await page.getByLabel("Filter").fill(`$['content']['label']="pinned"`);
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/filter=/);
    const rows = page.locator("tbody tr");
    assert.equal(await rows.count(), 1, "the filtered list");
    assert.match(await rows.first().textContent(), /Groceries/);
    await shot(page, "records-filtered");
    // With a type chosen the list is a table of its fields.
    const headers = await page.locator("#type-table thead th").allTextContents();
    assert.ok(headers.includes("title") && headers.includes("label"), `columns: ${headers}`);

    // Filters match links and tags: a text field is refused, saying what is there and what can be filtered.
    await page.getByLabel("Filter").fill(`$['content']['title']="Groceries"`);
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByRole("alert").waitFor();
    assert.match(await page.getByRole("alert").textContent(), /is a string in type `e2e_note`/);
    await shot(page, "records-unfilterable");

    // The builder writes a condition on a tag, quoted.
    await page.getByLabel("Filter").fill("");
    await page.getByLabel("Field").selectOption({ value: "tag:$['content']['label']" });
    await page.getByLabel("Value").fill("pinned");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/add_path=/);
    assert.equal(await page.getByLabel("Filter").inputValue(), `$['content']['label']="pinned"`);
    assert.equal(await rows.count(), 1, "the list the builder's condition filters");
    await shot(page, "records-builder");

    await page.getByLabel("Filter").fill(`$['content']['label']=(`);
    await page.getByRole("button", { name: "Show" }).click();
    const error = page.getByRole("alert");
    await error.waitFor();
    assert.match(await error.textContent(), /cannot be read/);
    assert.equal(await page.locator("mark.fault").count(), 1, "the error marks its position");
    await shot(page, "records-filter-error");

    // Search: the words of the records' text (any case), best match first.
    await page.getByLabel("Filter").fill("");
    await page.getByLabel("Words to find").fill("MILK groceries");
    await page.getByLabel("Order").selectOption({ value: "best" });
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/search=/);
    assert.equal(await rows.count(), 1, "the one note holding both words");
    assert.match(await rows.first().textContent(), /Groceries: milk, eggs/);
    await shot(page, "records-search");
    await page.getByLabel("Words to find").fill("");
    await page.getByLabel("Order").selectOption({ value: "$['received_at']+desc" });

    // Every note of the type, paged by next_page.
    await page.getByLabel("Filter").fill("");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL((url) => !url.searchParams.get("filter"));
    assert.equal(await rows.count(), 50, "the first page");
    await page.getByRole("link", { name: "Next page" }).click();
    await page.waitForURL(/page_start=/);
    assert.equal(await rows.count(), NOTES + 2 - 50, "the second page");
    await shot(page, "records-page-2");

    // A record and its history.
    await page.goto(`${CONSOLE}/browse/${ENTITY}/${pinned.id}`);
    await page.getByRole("heading", { name: /e2e_note/ }).waitFor();
    assert.match(await page.textContent("main"), /Groceries: milk, eggs/);
    assert.match(await page.textContent("main"), /Only the author/);
    const versions = page.locator("ol li a");
    assert.equal(await versions.count(), 2, "the record's versions");
    await shot(page, "record");
    await versions.nth(1).click();
    await page.getByRole("heading", { name: "Changes from its parent" }).waitFor();
    assert.match(await page.locator(".diff .del").first().textContent(), /Groceries"/);
    assert.match(await page.locator(".diff .add").first().textContent(), /Groceries: milk, eggs/);
    await shot(page, "version");

    // A record's blob: previewed, and downloadable by its name.
    await page.goto(`${CONSOLE}/browse/${ENTITY}/${photo.id}`);
    const preview = page.locator("img.preview");
    await preview.waitFor();
    assert.ok(await preview.evaluate((img) => img.complete && img.naturalWidth === 2), "the image preview loads");
    assert.equal(await page.getByRole("link", { name: "red.png" }).count(), 1);
    await shot(page, "record-blob");

    // An edit made stale by an app's write is refused; then made again.
    // The edit page is a form of the type's fields.
    await page.goto(`${CONSOLE}/browse/${ENTITY}/${pinned.id}/edit`);
    const title = page.getByLabel("title", { exact: true });
    assert.equal(await title.inputValue(), "Groceries: milk, eggs", "the form shows the record");
    assert.equal(await page.getByLabel("label (optional)").inputValue(), "pinned");
    await shot(page, "edit-form");
    await title.fill("Groceries: milk, eggs, bread");
    const meanwhile = (await full.ok("PUT", `${API}/records/${ENTITY}/${pinned.id}`, {
      content: { title: "Groceries: milk, eggs, tea", label: "pinned" },
    })).record;
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("alert").filter({ hasText: "changed this record while you edited it" }).waitFor();
    await shot(page, "edit-stale");
    assert.equal((await full.ok("GET", `${API}/records/${ENTITY}/${pinned.id}`)).record.version.hash, meanwhile.version.hash);
    await page.getByRole("link", { name: "Open the current version" }).click();
    await page.getByRole("link", { name: "Edit" }).click();
    await title.fill("Groceries: milk, eggs, tea, bread");
    await page.getByRole("button", { name: "Save" }).click();
    await page.waitForURL(`${CONSOLE}/browse/${ENTITY}/${pinned.id}?done=saved`);
    assert.match(await page.textContent("main"), /milk, eggs, tea, bread/);
    const edited = (await full.ok("GET", `${API}/records/${ENTITY}/${pinned.id}`)).record;
    assert.equal(edited.content.title, "Groceries: milk, eggs, tea, bread");
    assert.equal(edited.content.label, "pinned", "the form kept the untouched field");
    assert.equal(edited.version.parent_hash, meanwhile.version.hash);

    // What a field cannot take is said beside it, and nothing is stored.
    await page.getByRole("link", { name: "Edit" }).click();
    await page.getByLabel("photo (optional)").fill("{");
    await page.getByRole("button", { name: "Save" }).click();
    await page.locator("#field\\.photo-error").waitFor();
    assert.match(await page.locator("#field\\.photo-error").textContent(), /not JSON/);
    assert.equal(await title.inputValue(), "Groceries: milk, eggs, tea, bread", "what was typed stays");
    await shot(page, "edit-field-error");

    // A save the type refuses shows the violation's path and stores nothing (the JSON editor).
    await page.getByRole("link", { name: "Edit it as JSON" }).click();
    const json = page.getByLabel("The record, as JSON");
    await json.fill(JSON.stringify({ content: { title: 42 } }));
    await page.getByRole("button", { name: "Save" }).click();
    const violation = page.getByRole("alert");
    await violation.waitFor();
    assert.match(await violation.textContent(), /\$\['content'\]\['title'\]/);
    await shot(page, "edit-violation");

    // A new record, from the console: its type chosen, then its form.
    await page.getByRole("link", { name: "Records", exact: true }).click();
    await page.getByRole("link", { name: "New record" }).click();
    await page.getByLabel("Type").selectOption({ label: "e2e_note" });
    await page.getByRole("button", { name: "Show its form" }).click();
    await page.getByLabel("title", { exact: true }).fill("Written in the console");
    await shot(page, "new-record-form");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByText("The record was created.").waitFor();
    assert.match(await page.textContent("main"), /Written in the console/);
    assert.match(await page.textContent("main"), /none: the first version/);

    // Delete it.
    await page.goto(`${CONSOLE}/browse/${ENTITY}/${pinned.id}`);
    await page.getByLabel("Delete it everywhere").check();
    await page.getByRole("button", { name: "Delete" }).click();
    await page.getByText("The record was deleted.").waitFor();
    assert.match(await page.textContent("main"), /tombstone/);
    await shot(page, "deleted");
    assert.ok((await full.ok("GET", `${API}/records/${ENTITY}/${pinned.id}`)).record.no_content);

    // A new type from its form: the schema it makes shown, saved, then a record of it from its own form.
    await page.getByRole("link", { name: "Types", exact: true }).click();
    await page.getByLabel("Its name").fill("recipe");
    assert.equal(await page.getByLabel("Field 1", { exact: true }).inputValue(), "title");
    await page.getByLabel("Field 2", { exact: true }).fill("servings");
    await page.locator("#field_kind\\.1").selectOption({ value: "int" });
    await page.locator("#field_optional\\.1").check();
    await page.getByRole("button", { name: "Show the schema" }).click();
    const made = await page.locator("pre[data-kind=new-type-schema]").textContent();
    assert.deepEqual(JSON.parse(made).properties.content.properties.servings, { type: "int", optional: true }, made);
    await shot(page, "new-type");
    await page.getByRole("button", { name: "Save the type" }).click();
    await page.getByText("The record was created.").waitFor();
    await page.getByRole("link", { name: "Records", exact: true }).click();
    await page.getByRole("link", { name: "New record" }).click();
    await page.getByLabel("Type").selectOption({ label: "recipe" });
    await page.getByRole("button", { name: "Show its form" }).click();
    await page.getByLabel("title", { exact: true }).fill("Soup");
    await page.getByLabel("servings (optional)").fill("4");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByText("The record was created.").waitFor();
    assert.match(await page.textContent("main"), /"servings": 4/);
    // The same type saved again changes nothing.
    await page.getByRole("link", { name: "Types", exact: true }).click();
    await page.getByLabel("Its name").fill("recipe");
    await page.getByLabel("Field 2", { exact: true }).fill("servings");
    await page.locator("#field_kind\\.1").selectOption({ value: "int" });
    await page.locator("#field_optional\\.1").check();
    await page.getByRole("button", { name: "Save the type" }).click();
    await page.getByRole("status").filter({ hasText: "nothing changed" }).waitFor();

    // Types: check a pasted record against one.
    await page.getByRole("link", { name: "Types", exact: true }).click();
    await page.getByLabel("Type").selectOption({ label: "e2e_note" });
    await page.getByLabel("The record, as JSON").fill(JSON.stringify({ content: { title: 7 } }));
    await page.getByRole("button", { name: "Check" }).click();
    await page.getByRole("alert").waitFor();
    assert.match(await page.getByRole("alert").textContent(), /title/);
    await shot(page, "types");
    // Each type's "Use it from an app": the SDK's calls with its link, and its TypeScript types.
    const noteType = page.locator("details", { has: page.locator("summary", { hasText: "e2e_note" }) });
    await noteType.locator("summary").click();
    const sdk = await noteType.locator("pre[data-kind=sdk]").textContent();
    assert.match(sdk, /from "folio-client"/);
    assert.match(sdk, /folio\.records\.create\(\{ type: e2e_note, content: \{ title: "" \} \}\)/);
    assert.match(sdk, /filter\.at\("\$\['content'\]\['label'\]"/, "the list filters on the type's tag");
    const example = join(dataDir, "sdk-example.mjs");
    writeFileSync(example, sdk);
    const checked = spawnSync(process.execPath, ["--check", example], { encoding: "utf8" });
    assert.equal(checked.status, 0, `the SDK code is JavaScript:\n${checked.stderr}\n${sdk}`);
    assert.match(await noteType.locator("pre[data-kind=typescript]").textContent(), /export type E2eNoteContent = \{/);
    await shot(page, "types-api");

    // Apps: revoke one; its next signed request is refused.
    assert.equal((await victim.request("GET", `${API}/records`)).status, 200);
    await page.getByRole("link", { name: "Apps", exact: true }).click();
    assert.match(await page.textContent("main"), /every type \(full access/, "a full-access app says so");
    await shot(page, "apps");
    const sorter = page.locator("section.app", { has: page.getByRole("heading", { name: /Photo sorter/ }) });
    await sorter.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("status").filter({ hasText: "revoked" }).waitFor();
    await shot(page, "apps-revoked");
    const refused = await victim.request("GET", `${API}/records`);
    assert.equal(refused.status, 401);
    assert.match(refused.json().type, /auth\/401-unknown-app$/);
    assert.equal((await full.request("GET", `${API}/records`)).status, 200, "the other app goes on");

    // A second browser, signed in before the password changes.
    const other = await browser.newContext();
    const otherPage = await other.newPage();
    await otherPage.goto(CONSOLE);
    await otherPage.getByLabel("Password").fill(password);
    await otherPage.getByRole("button", { name: "Sign in" }).click();
    await otherPage.getByRole("heading", { name: "Overview" }).waitFor();

    // Account: a wrong current password, then the change.
    await page.getByRole("link", { name: "Account", exact: true }).click();
    await page.getByLabel("Current password").fill("wrong");
    await page.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel("New password again").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByRole("alert").filter({ hasText: "current password is wrong" }).waitFor();
    await page.getByLabel("Current password").fill(password);
    await page.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel("New password again").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByRole("status").filter({ hasText: "password was changed" }).waitFor();
    await shot(page, "account");
    // The change signed the other browser out; this one stays signed in.
    await otherPage.reload();
    await otherPage.getByLabel("Password").waitFor();
    await other.close();
    await page.getByRole("link", { name: "Overview", exact: true }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();

    // Signed out, the old password no longer opens the console; the new one does.
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.getByLabel("Password").waitFor();
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "Wrong password" }).waitFor();
    await page.getByLabel("Password").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Overview" }).waitFor();

    const blocked = messages.filter((message) => /Content Security Policy|Refused to/.test(message));
    assert.deepEqual(blocked, [], "the pages load nothing their policy refuses");
  } catch (error) {
    const failure = join(ARTIFACTS, "console-failure.png");
    await page.screenshot({ path: failure, fullPage: true }).catch(() => {});
    error.message +=
      `\n--- at ${page.url()} (screenshot ${failure})` +
      `\n--- browser console:\n${messages.join("\n")}` +
      `\n--- folio serve log (tail):\n${folio.log().slice(-4_000)}`;
    throw error;
  } finally {
    await context.close();
  }
});
