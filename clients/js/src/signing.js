// Signed requests (PROTOCOL.md §10): the wasm core says what to sign and
// writes the Authorization header; the app's key signs, in WebCrypto.
import { loadCore } from "./core.js";

const NONCE_DIGITS = 10;

/** A fresh nonce: ten hex digits (the most the protocol allows). */
export function newNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(NONCE_DIGITS / 2));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The parts of a URL a signature names (PROTOCOL.md §10): the path and
 * query as the WHATWG serializer writes them (as the server verifies), the
 * host without its port, and the explicit port, else 443.
 */
function signed(url) {
  return {
    pathAndQuery: url.pathname + url.search,
    host: url.hostname,
    port: url.port === "" ? 443 : Number(url.port),
  };
}

/**
 * A bearer token for GET of `url` until `expiresAt` (a Date or milliseconds;
 * at most 90 days ahead): the URL with its `bearer` parameter, usable
 * without any header (an `<img src>`).
 */
export async function bearerUrl({ key, appId, authorizationId, url, expiresAt, dialect = "svc" }) {
  const core = await loadCore();
  const target = new URL(url);
  const bearer = JSON.stringify({ dialect, appId, authorizationId, expiresAt: Number(expiresAt), ...signed(target) });
  const signature = await key.sign(core.bearerInput(bearer));
  const token = core.bearerToken(bearer, signature);
  target.search = `${target.search ? `${target.search}&` : "?"}bearer=${encodeURIComponent(token)}`;
  return target;
}

/**
 * The Authorization header for a request.
 *
 * `url` is the full request URL; its path and query are signed as the WHATWG
 * URL serializer writes them, as the server verifies. `headers` are the
 * signed headers, `[lowercaseName, value]` in order.
 */
export async function authorize({
  key,
  appId,
  authorizationId = null,
  method,
  url,
  headers = [],
  dialect = "svc",
  algorithmLine = true,
  ts = Date.now(),
  nonce = newNonce(),
}) {
  const core = await loadCore();
  const request = JSON.stringify({
    dialect,
    algorithmLine,
    appId,
    authorizationId,
    ts,
    nonce,
    method: method.toUpperCase(),
    ...signed(new URL(url)),
    headers,
  });
  const signature = await key.sign(core.signatureInput(request));
  return core.authorizationHeader(request, signature);
}
