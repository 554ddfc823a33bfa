// App keys: Ed25519 key pairs in WebCrypto. In browsers a generated key is
// not extractable (the SDK can sign with it, nothing can read it); in node
// a key can come from the seed `folio app add` prints.

import { IN_NODE } from "./runtime.js";

const ED25519 = { name: "Ed25519" };
// PKCS #8 for an Ed25519 private key is this prefix and the 32-byte seed (RFC 8410).
const PKCS8_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);

export function toBase64(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text);
}

export function fromBase64(text) {
  const standard = text.replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(standard), (c) => c.charCodeAt(0));
}

/** An app's Ed25519 key pair, and its public key in standard base64. */
export class AppKey {
  constructor(privateKey, publicKey) {
    this.privateKey = privateKey;
    this.publicKey = publicKey;
  }

  /** A new key; `extractable` only where it is to be saved (node, a key file). */
  static async generate({ extractable = false } = {}) {
    const pair = await crypto.subtle.generateKey(ED25519, extractable, ["sign", "verify"]);
    const raw = await crypto.subtle.exportKey("raw", pair.publicKey);
    return new AppKey(pair.privateKey, toBase64(raw));
  }

  /** The key whose 32-byte seed is `seed` (standard or URL-safe base64). */
  static async fromSeed(seed) {
    const bytes = fromBase64(seed);
    if (bytes.length !== 32) throw new TypeError("an Ed25519 seed is 32 bytes");
    const pkcs8 = new Uint8Array(PKCS8_PREFIX.length + 32);
    pkcs8.set(PKCS8_PREFIX);
    pkcs8.set(bytes, PKCS8_PREFIX.length);
    // Extractable once, to read the public half, then not again.
    const readable = await crypto.subtle.importKey("pkcs8", pkcs8, ED25519, true, ["sign"]);
    const { x } = await crypto.subtle.exportKey("jwk", readable);
    const privateKey = await crypto.subtle.importKey("pkcs8", pkcs8, ED25519, false, ["sign"]);
    return new AppKey(privateKey, toBase64(fromBase64(x)));
  }

  /**
   * In a browser: the app's key kept in IndexedDB under `name`, made (not
   * extractable) on first use. The page can sign with it and never read it.
   */
  static async inBrowser(name = "default") {
    const db = await openKeyStore();
    const kept = await request(db.transaction(KEY_STORE).objectStore(KEY_STORE).get(name));
    if (kept) return new AppKey(kept.privateKey, kept.publicKey);
    const key = await AppKey.generate();
    const store = db.transaction(KEY_STORE, "readwrite").objectStore(KEY_STORE);
    await request(store.put({ privateKey: key.privateKey, publicKey: key.publicKey }, name));
    return key;
  }

  /** In node: the key in the file at `path` (as {@link AppKey#save} wrote it), made there on first use. */
  static async inFile(path) {
    const { readFile } = await import("node:fs/promises");
    try {
      const { seed } = JSON.parse(await readFile(path, "utf8"));
      return AppKey.fromSeed(seed);
    } catch (error) {
      if (error.code !== "ENOENT") throw error;
    }
    const key = await AppKey.generate({ extractable: true });
    await key.save(path);
    return AppKey.fromSeed(await key.seed());
  }

  /** The 32-byte seed, standard base64: only for a key made extractable. */
  async seed() {
    const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", this.privateKey));
    return toBase64(pkcs8.subarray(PKCS8_PREFIX.length));
  }

  /** Writes the key to `path` (mode 0600; node, extractable keys only). */
  async save(path) {
    const { writeFile } = await import("node:fs/promises");
    const text = JSON.stringify({ algorithm: "ed25519", seed: await this.seed(), public_key: this.publicKey });
    await writeFile(path, `${text}\n`, { mode: 0o600, flag: "wx" });
  }

  /**
   * The Ed25519 signature of `bytes`. In node, by node:crypto on the same
   * key, at once: WebCrypto's sign runs on node's thread pool, which made
   * each signature wait about 70 µs where the signing itself takes 45.
   */
  async sign(bytes) {
    const signer = await nodeSigner(this.privateKey);
    if (signer) return signer(bytes);
    return new Uint8Array(await crypto.subtle.sign(ED25519, this.privateKey, bytes));
  }
}


const nodeSigners = new WeakMap();

/**
 * In node, a function that signs with `privateKey` (a CryptoKey, extractable
 * or not) through node:crypto's `KeyObject` of it; elsewhere `null`.
 */
async function nodeSigner(privateKey) {
  if (!IN_NODE) return null;
  if (!nodeSigners.has(privateKey)) {
    nodeSigners.set(privateKey, import("node:crypto").then(({ KeyObject, sign }) => {
      const key = KeyObject.from(privateKey);
      return (bytes) => new Uint8Array(sign(null, bytes, key));
    }));
  }
  return nodeSigners.get(privateKey);
}

// Browser key storage: one IndexedDB object store of CryptoKeys, which
// IndexedDB keeps as they are (a non-extractable key stays so).
const KEY_DB = "folio-client";
const KEY_STORE = "keys";

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function openKeyStore() {
  const open = indexedDB.open(KEY_DB, 1);
  open.onupgradeneeded = () => open.result.createObjectStore(KEY_STORE);
  return request(open);
}

