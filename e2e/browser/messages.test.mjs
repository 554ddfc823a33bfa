// The messages example (examples/messages) in headless Chromium, two people
// on two real `folio serve`s: Alice (alice.test, on 127.0.0.2:443) and Bob
// (bob.test, on 127.0.0.3:443), each signed in through the app on their
// own server, in a browser context of their own (Alice light, Bob dark,
// both 390 px wide). Both servers install the real messaging app's types
// by their published ids and find each other as the federation tests do
// (`--peer-resolve`, each trusting the other's certificate with
// `--peer-ca`). Alice starts a conversation with Bob; Bob sees it live and
// answers with an image; Alice edits her message; she stops sharing the
// conversation (Bob's server deletes its copy: docs/federation.md §4),
// shares it again, deletes her message, then the conversation. Every step
// waits, within DELIVERY, for what the other screen must show.
// Screenshots: target/browser-artifacts/messages-{step}-{alice,bob}.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, buildFolio, drawnPng, folioJson, startFolio, launchChromium } from "./harness.mjs";
import { serve } from "../../examples/messages/serve.mjs";

const ARTIFACTS = join(ROOT, "target", "browser-artifacts");
const REAL_TYPES = join(ROOT, "../shared/real-types");
const PUBLISHED = [
  ["conversation.json", "types.baq.dev/7583995c51cf44ad972fdc123105e1dc"],
  ["message.json", "types.baq.dev/153b3cb3a2f0494e950599de1cc13ef3"],
];
/** How long a step may take to show on the other person's screen. */
const DELIVERY = 20_000;
const TIMEOUT = { timeout: 240_000 };

const alice = { name: "alice", entity: "alice.test", address: "127.0.0.2", colorScheme: "light" };
const bob = { name: "bob", entity: "bob.test", address: "127.0.0.3", colorScheme: "dark" };
const sides = [alice, bob];
const otherOf = (side) => (side === alice ? bob : alice);

let bin, app, browser;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  bin = buildFolio();
  for (const side of sides) {
    side.dataDir = mkdtempSync(join(tmpdir(), `folio-messages-${side.name}-`));
    side.base = `https://${side.entity}`;
    const dir = ["--data-dir", side.dataDir];
    ({ password: side.password } = folioJson(bin, [
      "user", "add", side.name, "--entity", side.entity, "--base-url", side.base, "--json", ...dir,
    ]));
    // What each owner does once, as the app's README says.
    for (const [file, published] of PUBLISHED) {
      folioJson(bin, ["type", "add", "--user", side.name, "--published", published, "--json", join(REAL_TYPES, file), ...dir]);
    }
    // A first start writes the server's self-signed certificate, which the
    // other server is then told to trust.
    const first = await startFolio({ bin, dataDir: side.dataDir, baseUrl: side.base, address: side.address });
    await first.stop();
  }
  const resolve = sides.flatMap((side) => ["--peer-resolve", `${side.entity}=${side.address}:443`]);
  for (const side of sides) {
    side.folio = await startFolio({
      bin,
      dataDir: side.dataDir,
      baseUrl: side.base,
      address: side.address,
      args: [
        "--peer-ca", join(otherOf(side).dataDir, "tls/cert.pem"), ...resolve,
        "--outbox-first-retry-ms", "500", "--outbox-max-retry-ms", "2000",
      ],
    });
  }
  app = await serve(0);
  browser = await launchChromium({ hostRules: sides.map((side) => `MAP ${side.entity} ${side.address}`).join(",") });
});

after(async () => {
  await browser?.close();
  await app?.close();
  for (const side of sides) {
    await side.folio?.stop();
    if (side.dataDir) rmSync(side.dataDir, { recursive: true, force: true });
  }
});

/** Screenshots of both screens after a step. */
const shots = (step) =>
  Promise.all(sides.map((side) =>
    side.page.screenshot({ path: join(ARTIFACTS, `messages-${step}-${side.name}.png`), fullPage: true })));

/** Opens the app for `side` in a context of its own and signs in on its server. */
async function signIn(side, messages) {
  side.context = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: side.colorScheme });
  side.context.setDefaultTimeout(DELIVERY);
  const page = (side.page = await side.context.newPage());
  page.on("console", (message) => messages.push(`[${side.name} ${message.type()}] ${message.text()}`));
  page.on("pageerror", (error) => messages.push(`[${side.name} pageerror] ${error.message}`));
  await page.goto(`${app.origin}/`);
  await page.getByLabel("Your entity").fill(side.entity);
  await page.getByRole("button", { name: "Connect" }).click();
  await page.waitForURL(new RegExp(`^${side.base}/${side.name}/auth/[0-9a-f]{32}$`));
  await page.getByLabel("Password").fill(side.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Allow" }).click();
  await page.waitForURL((url) => url.origin === app.origin);
  await page.getByText("No conversations yet.").waitFor();
  assert.equal(await page.locator("#who").textContent(), side.entity);
}

const message = (side, text) => side.page.locator("#messages .message", { hasText: text });
const conversationButton = (side, name) => side.page.locator("#conversation-list").getByRole("button", { name });

test("Messages: two people on two servers talk, edit, unshare, share again and delete", TIMEOUT, async () => {
  const messages = [];
  const started = Date.now();
  try {
    for (const side of sides) await signIn(side, messages);
    await shots("1-signed-in");

    // Alice starts a conversation with Bob and writes.
    await alice.page.getByLabel("Start a conversation with").fill(bob.entity);
    await alice.page.getByRole("button", { name: "Start" }).click();
    await alice.page.getByRole("heading", { name: `With ${bob.entity}` }).waitFor();
    await alice.page.getByLabel("Message").fill("Hi Bob! Lunch on Friday?");
    await alice.page.getByRole("button", { name: "Send" }).click();
    await message(alice, "Hi Bob! Lunch on Friday?").waitFor();

    // Bob's screen: the conversation and the message arrive live.
    await conversationButton(bob, alice.entity).click();
    await bob.page.getByRole("heading", { name: `With ${alice.entity}` }).waitFor();
    await message(bob, "Hi Bob! Lunch on Friday?").waitFor();
    assert.equal(await message(bob, "Hi Bob!").locator(".message-author").textContent(), alice.entity);
    await shots("2-first-message");

    // Bob answers with an image; on his screen it loads from his server.
    await bob.page.getByLabel("Message").fill("Friday works. This is the place:");
    const png = await drawnPng(bob.page, "#1b8a5a");
    await bob.page.getByLabel("Image").setInputFiles({ name: "place.png", mimeType: "image/png", buffer: png });
    await bob.page.getByRole("button", { name: "Send" }).click();
    const bobsImage = message(bob, "This is the place").locator("img");
    await bob.page.waitForFunction((img) => img.complete && img.naturalWidth === 240, await bobsImage.elementHandle());

    // Alice's screen: the reply arrives live, with its image's record.
    const reply = message(alice, "This is the place");
    await reply.waitFor();
    assert.equal(await reply.locator(".message-author").textContent(), bob.entity);
    // Her server reads the image from Bob's the first time her app asks
    // for it, and serves it.
    const alicesImage = reply.locator("img");
    await alicesImage.waitFor();
    await alice.page.waitForFunction((img) => img.complete && img.naturalWidth === 240, await alicesImage.elementHandle());
    await shots("3-reply-with-image");

    // Each person's console on their own server lists the conversation's
    // records, the other person's as theirs.
    for (const [side, other] of [[alice, bob], [bob, alice]]) {
      const page = await side.context.newPage();
      await page.goto(`${side.base}/${side.name}/console`);
      if (await page.getByLabel("Password").count()) {
        await page.getByLabel("Password").fill(side.password);
        await page.getByRole("button", { name: "Sign in" }).click();
      }
      await page.getByRole("heading", { name: "Overview" }).waitFor();
      await page.getByRole("link", { name: "Records", exact: true }).click();
      await page.locator("tbody tr").first().waitFor();
      assert.match(await page.textContent("main"), new RegExp(other.entity.replace(".", "\\.")));
      await page.screenshot({ path: join(ARTIFACTS, `messages-console-${side.name}.png`), fullPage: true });
      await page.close();
    }

    // Alice edits her message; Bob sees the new version.
    await message(alice, "Lunch on Friday?").getByRole("button", { name: "Edit" }).click();
    await alice.page.getByLabel("Edit message").fill("Hi Bob! Lunch on Saturday instead?");
    await alice.page.getByRole("button", { name: "Save" }).click();
    await message(bob, "Lunch on Saturday instead?").waitFor();
    await message(bob, "Lunch on Friday?").waitFor({ state: "detached" });
    await shots("4-edited");

    // Alice stops sharing the conversation: Bob's server learns that his
    // access ended and deletes its copies; his screen loses the conversation.
    await alice.page.getByRole("button", { name: `Stop sharing with ${bob.entity}` }).click();
    await alice.page.getByText("Only you can read it").waitFor();
    await conversationButton(bob, alice.entity).waitFor({ state: "detached" });
    await bob.page.getByText("no longer shared with you").waitFor();
    assert.equal(await bob.page.locator("#conversation").isHidden(), true);
    await shots("5-unshared");

    // Alice shares it again: Bob's server takes the new versions in place
    // of its deletions, and the conversation is back on his screen.
    await alice.page.getByLabel("Share with").fill(bob.entity);
    await alice.page.getByRole("button", { name: "Share", exact: true }).click();
    await alice.page.getByText(`Shared with ${bob.entity}.`).waitFor();
    await conversationButton(bob, alice.entity).click();
    await message(bob, "Lunch on Saturday instead?").waitFor();
    await message(bob, "This is the place").waitFor();
    assert.equal(await bob.page.locator("#status").textContent(), "");
    await shots("6-shared-again");

    // Alice deletes her message: it disappears from Bob's screen.
    await message(alice, "Lunch on Saturday").getByRole("button", { name: "Delete" }).click();
    await message(alice, "Lunch on Saturday").waitFor({ state: "detached" });
    await message(bob, "Lunch on Saturday").waitFor({ state: "detached" });
    await message(bob, "This is the place").waitFor();
    await shots("7-message-deleted");

    // Alice deletes the conversation: gone from both screens.
    await alice.page.getByRole("button", { name: "Delete conversation" }).click();
    await alice.page.getByText("No conversations yet.").waitFor();
    await bob.page.getByText("No conversations yet.").waitFor();
    await bob.page.getByText("That conversation was deleted").waitFor();
    await shots("8-conversation-deleted");

    for (const side of sides) {
      assert.equal(await side.page.locator("#error").isHidden(), true, await side.page.locator("#error").textContent());
    }
    console.log(`# the conversation took ${((Date.now() - started) / 1000).toFixed(1)} s, sign-ins included`);
  } catch (error) {
    await Promise.all(sides.map((side) =>
      side.page?.screenshot({ path: join(ARTIFACTS, `messages-failure-${side.name}.png`), fullPage: true }).catch(() => {})));
    const logs = sides.map((side) => `--- ${side.entity}'s folio serve log (tail):\n${side.folio.log().slice(-4_000)}`);
    error.message += `\n--- browser console:\n${messages.join("\n")}\n${logs.join("\n")}`;
    throw error;
  } finally {
    for (const side of sides) await side.context?.close();
  }
});
