// The SDK signs exactly as ../shared/vectors/signatures.json says, and
// computes version hashes as ../shared/vectors/version-hashes.json says.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { AppKey, authorize, bearerUrl, versionHash } from "../src/index.js";

const vectors = (name) =>
  readFile(new URL(`../../../../shared/vectors/${name}`, import.meta.url), "utf8").then(JSON.parse);

test("every valid header vector is signed to its Authorization header", async () => {
  const cases = (await vectors("signatures.json")).filter(
    (c) => c.kind === "authorization_header" && c.expect_valid,
  );
  assert.ok(cases.length >= 10, `${cases.length} cases`);
  for (const c of cases) {
    const key = await AppKey.fromSeed(c.private_key_base64);
    assert.equal(key.publicKey, c.public_key_base64, `${c.name}: public key`);
    const header = await authorize({
      key,
      appId: c.app_record_id,
      authorizationId: c.authorization_id === "" ? null : c.authorization_id,
      method: c.method,
      url: `https://${c.host}:${c.port}${c.path_and_query}`,
      headers: c.headers,
      dialect: c.prefix,
      algorithmLine: c.layout === "with_algorithm_line",
      ts: c.ts,
      nonce: c.nonce,
    });
    assert.equal(header, c.authorization_header, c.name);
  }
});

test("every valid bearer vector is made into its token", async () => {
  const cases = (await vectors("signatures.json")).filter((c) => c.kind === "bearer_token" && c.expect_valid);
  assert.ok(cases.length >= 2, `${cases.length} cases`);
  for (const c of cases) {
    const url = await bearerUrl({
      key: await AppKey.fromSeed(c.private_key_base64),
      appId: c.app_record_id,
      authorizationId: c.authorization_id === "" ? null : c.authorization_id,
      url: `https://${c.host}:${c.port}${c.path_and_query}`,
      expiresAt: c.ts,
      dialect: c.prefix,
    });
    assert.equal(url.searchParams.get("bearer"), c.token_base64, c.name);
  }
});

test("a generated key signs, and its public key is 32 bytes of base64", async () => {
  const key = await AppKey.generate();
  assert.equal(atob(key.publicKey).length, 32);
  assert.equal((await key.sign(new Uint8Array([1, 2, 3]))).length, 64);
});

test("every version hash vector is computed by the core", async () => {
  const cases = await vectors("version-hashes.json");
  assert.ok(cases.length > 0);
  for (const c of cases) {
    assert.equal(await versionHash(c.record), c.expected_hash, c.name);
  }
});

test("a key file is made once, kept private to its owner, and read back as the same key", async () => {
  const { mkdtemp, rm, stat } = await import("node:fs/promises");
  const { join } = await import("node:path");
  const { tmpdir } = await import("node:os");
  const dir = await mkdtemp(join(tmpdir(), "folio-key-"));
  try {
    const path = join(dir, "app-key.json");
    const made = await AppKey.inFile(path);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    const read = await AppKey.inFile(path);
    assert.equal(read.publicKey, made.publicKey);
    const message = new Uint8Array([7, 7, 7]);
    assert.deepEqual(await read.sign(message), await made.sign(message), "Ed25519 is deterministic: the same key");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
