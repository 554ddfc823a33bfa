// The edge host, built by worker-build, running in workerd (wrangler's unstable_dev).
// For now it answers preflights and reports everything else as not implemented.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { unstable_dev } from "wrangler";

let worker;
before(async () => {
  worker = await unstable_dev("host-worker/build/index.js", {
    config: "wrangler.toml",
    ip: "127.0.0.1",
    logLevel: "warn",
    experimental: { disableExperimentalWarning: true },
  });
});
after(async () => {
  await worker?.stop();
});

test("OPTIONS answers 204 with exactly the spec's four CORS headers", async () => {
  const res = await worker.fetch("/api/alice/records", { method: "OPTIONS" });
  assert.equal(res.status, 204);
  assert.equal(res.headers.get("access-control-allow-headers"),
    "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey");
  assert.equal(res.headers.get("access-control-allow-methods"), "HEAD,GET,POST,PUT,DELETE,OPTIONS");
  assert.equal(res.headers.get("access-control-allow-origin"), "*");
  assert.equal(res.headers.get("access-control-max-age"), "43200");
});

test("other requests get the core's problem+json", async () => {
  const res = await worker.fetch("/api/alice/records");
  assert.equal(res.status, 501);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.equal(res.headers.get("cache-control"), "no-cache");
  assert.equal(res.headers.get("access-control-allow-origin"), "*");
  const body = await res.json();
  assert.equal(body.code, "not_implemented");
  assert.equal(body.status, 501);
  assert.match(body.type, /\/docs\/error-types\/server\/501-not-implemented$/);
});
