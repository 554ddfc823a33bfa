// The edge host, built by worker-build, running in workerd (wrangler's
// unstable_dev): what holds before any store exists. The whole API is
// checked by the conformance suite against `wrangler dev`
// (e2e/worker-conformance.mjs).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { unstable_dev } from "wrangler";

const options = {
  config: "wrangler.toml",
  ip: "127.0.0.1",
  logLevel: "warn",
  experimental: { disableExperimentalWarning: true },
};

let production;
let dev;
before(async () => {
  production = await unstable_dev("host-worker/build/index.js", options);
  dev = await unstable_dev("host-worker/build/index.js", { ...options, env: "dev" });
});
after(async () => {
  await production?.stop();
  await dev?.stop();
});

test("in production a plain-HTTP request is redirected to HTTPS with 308", async () => {
  const res = await production.fetch("/api/alice/records?page_size=1", { redirect: "manual" });
  assert.equal(res.status, 308);
  const location = new URL(res.headers.get("location"));
  assert.equal(location.protocol, "https:");
  assert.equal(location.pathname + location.search, "/api/alice/records?page_size=1");
});

test("OPTIONS answers 204 with the spec's four CORS headers", async () => {
  const res = await dev.fetch("/api/alice/records", { method: "OPTIONS" });
  assert.equal(res.status, 204);
  assert.equal(res.headers.get("access-control-allow-headers"),
    "Authorization,Content-Type,X-Svc-Client-Id,Last-Event-Id,X-Svc-PublicKey");
  assert.equal(res.headers.get("access-control-allow-methods"), "HEAD,GET,POST,PUT,DELETE,OPTIONS");
  assert.equal(res.headers.get("access-control-allow-origin"), "*");
  assert.equal(res.headers.get("access-control-max-age"), "43200");
});

test("an error type's page is served from core", async () => {
  const res = await dev.fetch("/docs/error-types/request/404-not-found");
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/html/);
});
