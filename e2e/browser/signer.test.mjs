// The browser test's JS signer (app/signer.js) against the shared signature
// vectors: every valid Authorization header case must come out byte-exact,
// so a request the app page signs is one the server can verify.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { SVC, BAQ, signatureInput, authorizationHeader, importSeed, urlTarget } from "./app/signer.js";

const vectors = JSON.parse(
  readFileSync(new URL("../../../shared/vectors/signatures.json", import.meta.url), "utf8"),
);
const cases = vectors.filter((c) => c.kind === "authorization_header" && c.expect_valid);

test("the vectors hold valid Authorization header cases", () => {
  assert.ok(cases.length >= 10, `only ${cases.length} cases`);
});

for (const c of cases) {
  test(`reproduces ${c.name}`, async () => {
    const request = {
      dialect: { svc: SVC, baq: BAQ }[c.prefix],
      withAlgorithm: c.layout === "with_algorithm_line",
      ts: c.ts,
      nonce: c.nonce,
      authorizationId: c.authorization_id,
      method: c.method,
      pathAndQuery: c.path_and_query,
      host: c.host,
      port: c.port,
      headers: c.headers,
    };
    assert.equal(signatureInput(request), c.signature_input);
    const key = await importSeed(c.private_key_base64);
    assert.equal(await authorizationHeader({ key, appId: c.app_record_id, ...request }), c.authorization_header);
  });
}

test("a URL's signed target is the WHATWG serialization, host without port, port 443 unless explicit", () => {
  assert.deepEqual(urlTarget("https://alice.test/api/alice/records?filter=$['type']=a+b"), {
    pathAndQuery: "/api/alice/records?filter=$[%27type%27]=a+b",
    host: "alice.test",
    port: 443,
  });
  assert.deepEqual(urlTarget("https://Alice.TEST:8443/a%2Fb/../c"), {
    pathAndQuery: "/c",
    host: "alice.test",
    port: 8443,
  });
});
