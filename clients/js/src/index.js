// Folio's client SDK. This first part: app keys and signed requests on the
// wasm core, and version hashes checked by the same code as the server's.
export { AppKey } from "./keys.js";
export { authorize, newNonce } from "./signing.js";
export { loadCore } from "./core.js";

import { loadCore } from "./core.js";

/** The version hash of `record` (as received), computed by the core. */
export async function versionHash(record) {
  const core = await loadCore();
  return core.versionHash(typeof record === "string" ? record : JSON.stringify(record));
}
