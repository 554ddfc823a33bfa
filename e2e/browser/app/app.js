// The test app's logic (PROTOCOL.md §10, §12). Query parameters on first load:
// `entity` (prefills the input) and `type`, the record id of a Type record of
// that entity the app asks to read. Connect: discover the server from the
// entity's `Link` header, register an App record signed with a new Ed25519 key
// (kept in sessionStorage across the redirect), go to the consent page. Back
// with `?authorization_id=…`: list the records of that type with a signed GET
// and show `{status, body}` as JSON in #result; with `?error=…`: show it.
import { generateKey, exportSeed, exportPublicKey, importSeed, signedHeaders, newRecordId } from "./signer.js";

const ENTITY_RECORD_REL = "https://folio.dev/rels/entity-record";
const SYSTEM_ENTITY = "system.folio.dev";
const APP_TYPE_ID = "8a7b6c5d4e3f4a2b9c1d0e8f7a6b5c42";
const STATE_KEY = "folio-test-app";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

function status(text) {
  $("status").textContent = text;
}

function fail(text) {
  $("error").textContent = text;
  $("error").hidden = false;
}

/** An RFC 6570 level-1 expansion: enough for the Entity record's templates. */
function expand(template, variables) {
  return template.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(variables[name]));
}

/** The target of the first `Link` whose rel is `rel`, resolved against `base`. */
function linkTarget(header, rel, base) {
  for (const match of (header ?? "").matchAll(/<([^>]*)>((?:\s*;\s*[^;,]+)*)/g)) {
    const rels = /;\s*rel="?([^";]*)"?/.exec(match[2])?.[1].split(/\s+/) ?? [];
    if (rels.includes(rel)) return new URL(match[1], base).href;
  }
  return null;
}

async function json(response, what) {
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error(`${what}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** The entity's server endpoints: `HEAD https://{entity}/`, then its Entity record. */
async function discover(entity) {
  const root = `https://${entity}/`;
  const head = await fetch(root, { method: "HEAD" });
  const recordUrl = linkTarget(head.headers.get("link"), ENTITY_RECORD_REL, root);
  if (!recordUrl) throw new Error(`discovery: ${root} answered ${head.status} without an entity-record Link`);
  const { record } = await json(await fetch(recordUrl), "reading the Entity record");
  const server = record.content.servers[0];
  if (!server) throw new Error("the Entity record lists no server");
  return server.endpoints;
}

async function connect(entity) {
  const typeId = params.get("type");
  if (!typeId) throw new Error("the page needs ?type=<record id of the Type record to read>");
  status(`Discovering ${entity}…`);
  const endpoints = await discover(entity);

  // The App type is public: its latest version hash goes into the App record's type.
  const appTypeUrl = expand(endpoints.record, { entity: SYSTEM_ENTITY, record_id: APP_TYPE_ID });
  const appType = (await json(await fetch(appTypeUrl), "reading the App type")).record;

  status("Registering…");
  const keys = await generateKey();
  const appId = newRecordId();
  const publicKeyHeader = `algorithm="ed25519" public_key="${await exportPublicKey(keys.publicKey)}"`;
  const body = JSON.stringify({
    id: appId,
    type: { entity: SYSTEM_ENTITY, record_id: APP_TYPE_ID, version_hash: appType.version.hash },
    content: {
      name: "Folio test app",
      description: "The browser end-to-end test's app: it reads your notes.",
      uris: { redirect: `${location.origin}${location.pathname}{?authorization_id}`, website: location.origin },
      scope_request: { read: [{ entity, record_id: typeId }] },
    },
  });
  const headers = await signedHeaders({
    key: keys.privateKey, appId, authorizationId: "", method: "POST", url: endpoints.new_record,
    signed: [["x-svc-publickey", publicKeyHeader]],
  });
  const response = await fetch(endpoints.new_record, {
    method: "POST", body, headers: { ...headers, "content-type": "application/json" },
  });
  await json(response, "registering the app");
  const serverKey = response.headers.get("x-svc-publickey");
  if (!serverKey) throw new Error("registration answered without the server's X-Svc-PublicKey");

  const state = { entity, endpoints, typeId, appId, seed: await exportSeed(keys.privateKey), serverKey };
  sessionStorage.setItem(STATE_KEY, JSON.stringify(state));
  status("Registered; on to the consent page…");
  location.assign(expand(endpoints.auth, { record_id: appId }));
}

/** Back from the consent page with an authorization: one signed GET. */
async function authorized(authorizationId) {
  const state = JSON.parse(sessionStorage.getItem(STATE_KEY) ?? "null");
  if (!state) throw new Error("authorized, but this tab holds no key (sessionStorage is empty)");
  status(`Authorized (${authorizationId}); reading…`);
  const url = new URL(state.endpoints.records);
  url.searchParams.set("filter", `$['type']=${state.entity}+${state.typeId}`);
  const key = await importSeed(state.seed);
  const headers = await signedHeaders({ key, appId: state.appId, authorizationId, method: "GET", url: url.href });
  const response = await fetch(url, { headers });
  const body = await response.json().catch(() => null);
  $("result").textContent = JSON.stringify({ status: response.status, body }, null, 2);
  $("result").hidden = false;
  status(response.ok ? `Authorized (${authorizationId})` : `The signed request failed: ${response.status}`);
}

async function main() {
  if (params.has("authorization_id")) return authorized(params.get("authorization_id"));
  if (params.has("error")) {
    return fail(params.get("error") === "access_denied" ? "Access denied" : `Error: ${params.get("error")}`);
  }
  $("entity").value = params.get("entity") ?? "";
  $("connect").hidden = false;
  $("connect").addEventListener("submit", (event) => {
    event.preventDefault();
    $("error").hidden = true;
    connect($("entity").value.trim()).catch((error) => fail(error.message));
  });
}

main().catch((error) => fail(error.message));
