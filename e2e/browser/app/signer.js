// Ed25519 request signatures (spec §5.1, PROTOCOL.md §10) with WebCrypto, for
// the browser test's app page and for the node side of the test alike; it
// uses only globals both have (crypto.subtle, btoa, TextEncoder).
// e2e/browser/signer.test.mjs holds it to ../shared/vectors/signatures.json.

/** The spec's names (`SVC`, `svc.request`) and the original protocol's. */
export const SVC = { scheme: "SVC", prefix: "svc" };
export const BAQ = { scheme: "BAQ", prefix: "baq" };

// A PKCS #8 wrapper for a bare 32-byte Ed25519 seed (RFC 8410): WebCrypto
// imports private keys only in this form (or as JWK).
const PKCS8_ED25519_PREFIX = [
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

export function toBase64(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text);
}

export function fromBase64(text) {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

/** A new extractable key pair. */
export async function generateKey() {
  return crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
}

/** The standard base64 of the 32-byte seed: the form the spec keeps private keys in. */
export async function exportSeed(privateKey) {
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", privateKey));
  return toBase64(pkcs8.slice(PKCS8_ED25519_PREFIX.length));
}

/** The standard base64 of the 32-byte public key. */
export async function exportPublicKey(publicKey) {
  return toBase64(await crypto.subtle.exportKey("raw", publicKey));
}

/** A signing key from the standard base64 of its 32-byte seed. */
export async function importSeed(seedBase64) {
  const seed = fromBase64(seedBase64);
  if (seed.length !== 32) throw new Error(`an Ed25519 seed is 32 bytes, not ${seed.length}`);
  const pkcs8 = new Uint8Array([...PKCS8_ED25519_PREFIX, ...seed]);
  return crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, false, ["sign"]);
}

/**
 * What a signature covers of a URL: the target as a WHATWG URL serializer
 * writes it (what fetch sends), the host without port, and the port (443
 * unless explicit).
 */
export function urlTarget(url) {
  const parsed = new URL(url);
  return {
    pathAndQuery: parsed.pathname + parsed.search,
    host: parsed.hostname,
    port: parsed.port === "" ? 443 : Number(parsed.port),
  };
}

/**
 * The signature input (spec §5.1): one line each, each ending with `\n`.
 * `withAlgorithm: false` leaves out the algorithm line (the original SDKs'
 * layout). `headers` is `[[lowercase name, value], …]` in signing order.
 */
export function signatureInput({
  dialect = SVC, withAlgorithm = true, ts, nonce, authorizationId = "",
  method, pathAndQuery, host, port, headers = [],
}) {
  const lines = [`${dialect.prefix}.request`];
  if (withAlgorithm) lines.push("ed25519");
  lines.push(String(ts), nonce, authorizationId, method.toUpperCase(), pathAndQuery, host, String(port));
  for (const [name, value] of headers) lines.push(`${name}=${value}`);
  return lines.map((line) => `${line}\n`).join("");
}

/** The `Authorization` header value; `key` is a CryptoKey that may sign. */
export async function authorizationHeader({ key, appId, ...request }) {
  const { dialect = SVC, withAlgorithm = true, ts, nonce, headers = [] } = request;
  const input = signatureInput(request);
  const signature = toBase64(
    await crypto.subtle.sign({ name: "Ed25519" }, key, new TextEncoder().encode(input)),
  );
  const names = headers.map(([name]) => name).join(",");
  const parameters = withAlgorithm
    ? [["algorithm", "ed25519"], ["ts", ts], ["nonce", nonce], ["id", appId], ["headers", names], ["signature", signature]]
    // The original SDKs' order, so the vectors' headers come out identical.
    : [["id", appId], ["ts", ts], ["nonce", nonce], ["headers", names], ["signature", signature]];
  return `${dialect.scheme} ${parameters.map(([name, value]) => `${name}="${value}"`).join(" ")}`;
}

/** Ten random hex characters: the longest nonce the spec allows. */
export function newNonce() {
  return [...crypto.getRandomValues(new Uint8Array(5))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");
}

/** A random record id: 32 lowercase hex characters. */
export function newRecordId() {
  return [...crypto.getRandomValues(new Uint8Array(16))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");
}

/**
 * The headers that sign one request to `url`: `Authorization`, plus the
 * `signed` headers themselves (`[[lowercase name, value], …]`).
 */
export async function signedHeaders({ key, appId, authorizationId = "", method, url, signed = [] }) {
  const authorization = await authorizationHeader({
    key, appId, authorizationId, method, ...urlTarget(url),
    ts: Date.now(), nonce: newNonce(), headers: signed,
  });
  return { ...Object.fromEntries(signed), authorization };
}
