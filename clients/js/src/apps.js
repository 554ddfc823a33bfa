// An app's way in (PROTOCOL.md §10): it registers its App record with a
// key of its own, sends the user to the consent page, and on the way back
// reads the App Authorization the user made, or their refusal.
import { Folio } from "./client.js";
import { FolioError } from "./errors.js";
import { recordLink } from "./records.js";

/** A new record id: 32 random hex digits. */
export function newRecordId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// The key header a browser may send (the spec's CORS list allows it).
const PUBLIC_KEY_HEADER = { svc: "x-svc-publickey", baq: "x-baq-publickey" };

/** `{read, write, subscribe}` of Type record links (or records) as the App record states them. */
function scopeRequest(scope = {}) {
  const request = {};
  for (const grant of ["read", "write", "subscribe"]) {
    const types = scope[grant] ?? [];
    if (types.length > 0) {
      request[grant] = types.map((type) =>
        type.record_id ? { entity: type.entity, record_id: type.record_id } : recordLink(type),
      );
    }
  }
  return request;
}

/**
 * Registers an app with `entity`'s store: its App record (`name`,
 * `description`, `website`, the `redirect` URI template the consent page
 * returns to, e.g. `https://app.example/back{?authorization_id}`, and the
 * `scope` it asks for), signed with `key`. Answers `{appId, record,
 * serverKey, consentUrl}`: send the user to `consentUrl`.
 */
export async function register({
  entity,
  key,
  id = newRecordId(),
  name,
  description,
  website,
  redirect,
  scope,
  dialect = "svc",
  fetch = globalThis.fetch,
}) {
  const anonymous = await Folio.connect({ entity, dialect, fetch });
  const appType = await anonymous.records.builtinType("app");
  const folio = new Folio({
    entity: anonymous.entity,
    endpoints: anonymous.endpoints,
    app: { appId: id, authorizationId: null, key },
    dialect,
    fetch,
  });
  const uris = { redirect };
  if (website) uris.website = website;
  const content = { name, uris, scope_request: scopeRequest(scope) };
  if (description) content.description = description;
  const header = PUBLIC_KEY_HEADER[dialect];
  const response = await folio.send("POST", folio.url("new_record"), {
    body: { id, type: appType, content },
    headers: { [header]: `algorithm="ed25519" public_key="${key.publicKey}"` },
    sign: [header],
  });
  if (!response.ok) throw await FolioError.from(response);
  const { record } = await response.json();
  const serverKey = /public_key="([^"]*)"/.exec(response.headers.get(header) ?? "")?.[1] ?? null;
  return { appId: id, record, serverKey, consentUrl: folio.url("auth", { record_id: id }) };
}

/**
 * The App Authorization id the consent page sent the user back with (the
 * URL the redirect template became); a refusal is a FolioError with code
 * `access_denied`.
 */
export function authorizationFrom(returnedUrl) {
  const url = new URL(returnedUrl);
  const error = url.searchParams.get("error");
  if (error) {
    throw new FolioError({ status: 403, code: error, title: "the user did not authorize the app" });
  }
  const id = url.searchParams.get("authorization_id");
  if (!id || !/^[0-9a-f]{32}$/.test(id)) {
    throw new FolioError({ status: 400, code: "no_authorization", title: `${url} carries no authorization_id` });
  }
  return id;
}
