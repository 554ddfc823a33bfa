// Folio's client SDK: a user's store as one app sees it, signed requests on
// the wasm core, records and lists, and problems as typed errors.
export { AppKey } from "./keys.js";
export { authorize, bearerUrl, newNonce } from "./signing.js";
export { loadCore } from "./core.js";
export { Folio, expand } from "./client.js";
export { authorizationFrom, newRecordId, register } from "./apps.js";
export { FolioError } from "./errors.js";
export { Subscription } from "./events.js";
export { Page, recordLink, versionLink } from "./records.js";
export * as filter from "./filter.js";

import { loadCore } from "./core.js";

/** The version hash of `record` (as received), computed by the core. */
export async function versionHash(record) {
  const core = await loadCore();
  return core.versionHash(typeof record === "string" ? record : JSON.stringify(record));
}
