// An app's way in against a real `folio serve`: registration with a key of
// its own, the consent page (signed in with the user's password, as a
// browser does over its forms), and the way back: an authorization that
// signs requests within the granted scope, or the user's refusal.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { AppKey, Folio, FolioError, authorizationFrom, register } from "../src/index.js";
import { newType, startServer } from "./server.mjs";

let server;
let owner;
let noteType;
let otherType;

before(async () => {
  server = await startServer();
  owner = await Folio.connect({ entity: server.entityUrl, app: server.app });
  noteType = await newType(owner, "consent_note", { title: { type: "string" } });
  otherType = await newType(owner, "consent_other", { title: { type: "string" } });
});

after(() => server?.stop());

/** The consent page's forms, as a browser posts them: sign in, then `decision`. */
async function consent(url, password, decision, ticks) {
  let cookie = "";
  const origin = new URL(url).origin;
  // The session cookie, as the browser keeps it.
  const keep = (response) => {
    const set = response.headers.get("set-cookie");
    if (set) cookie = set.split(";")[0];
  };
  const page = async () => {
    const response = await fetch(url, { headers: cookie ? { cookie } : {} });
    assert.equal(response.status, 200);
    keep(response);
    const html = await response.text();
    return /name="csrf" value="([^"]+)"/.exec(html)[1];
  };
  const post = async (fields) => {
    const response = await fetch(url, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", origin, ...(cookie ? { cookie } : {}) },
      body: new URLSearchParams(fields).toString(),
    });
    keep(response);
    assert.equal(response.status, 303, await response.clone().text());
    return response.headers.get("location");
  };
  await post([["csrf", await page()], ["action", "sign_in"], ["password", password]]);
  return post([["csrf", await page()], ["action", decision], ...ticks]);
}

test("an app registers, the user approves, and the app writes within its grant only", async () => {
  const key = await AppKey.generate();
  const app = await register({
    entity: server.entityUrl,
    key,
    name: "Notes",
    description: "Takes notes.",
    website: "https://notes.example/",
    redirect: "https://notes.example/back{?authorization_id}",
    scope: { read: [noteType], write: [noteType], subscribe: [noteType] },
  });
  assert.match(app.appId, /^[0-9a-f]{32}$/);
  assert.equal(atob(app.serverKey).length, 32, "the server's key for the app");
  const tick = `${noteType.entity} ${noteType.record_id}`;
  const back = await consent(app.consentUrl, server.password, "approve", [["read", tick], ["write", tick], ["subscribe", tick]]);
  const authorizationId = authorizationFrom(back);

  const folio = await Folio.connect({ entity: server.entityUrl, app: { appId: app.appId, authorizationId, key } });
  const note = await folio.records.create({ type: noteType, content: { title: "mine" } });
  assert.equal((await folio.records.get(note.id)).content.title, "mine");
  await assert.rejects(folio.records.create({ type: otherType, content: { title: "not granted" } }), (error) => {
    assert.ok(error instanceof FolioError);
    assert.equal(error.status, 403);
    return true;
  });
});

test("a refusal comes back as access_denied", async () => {
  const app = await register({
    entity: server.entityUrl,
    key: await AppKey.generate(),
    name: "Refused",
    redirect: "https://refused.example/back{?authorization_id}",
    scope: { read: [noteType] },
  });
  const back = await consent(app.consentUrl, server.password, "deny", []);
  assert.throws(() => authorizationFrom(back), { name: "FolioError", code: "access_denied" });
});
