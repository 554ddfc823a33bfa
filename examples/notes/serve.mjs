// Serves Notes as static files: this folder at `/`, and the SDK
// (clients/js: its sources and the wasm core `npm run build` made) at
// `/sdk/`, where index.html's import map points. http://localhost is a
// secure context, as WebCrypto needs.
//
//   node examples/notes/serve.mjs [PORT]      (default 8090)
import { existsSync, readFileSync, statSync } from "node:fs";
import http from "node:http";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const sdk = resolve(here, "../../clients/js");
const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
};

/** The file a path names, inside `folder` (this one unless told) or the SDK's `src/` and `pkg/`, else null. */
export function fileFor(path, folder = here) {
  const [root, rest] = path.startsWith("/sdk/") ? [sdk, path.slice("/sdk/".length)] : [folder, path.slice(1) || "index.html"];
  const file = normalize(join(root, decodeURIComponent(rest)));
  const allowed = root === sdk ? [join(sdk, "src/"), join(sdk, "pkg/")] : [root];
  if (!allowed.some((dir) => file.startsWith(dir)) || !TYPES[extname(file)]) return null;
  return existsSync(file) && statSync(file).isFile() ? file : null;
}

/**
 * Starts the server for `folder` (this one unless told: examples/messages
 * is served the same way); resolves to `{origin, close}`.
 */
export function serve(port = 8090, host = "127.0.0.1", folder = here) {
  if (!existsSync(join(sdk, "pkg/folio_core_bg.wasm"))) {
    throw new Error("the SDK's wasm core is missing: (cd clients/js && npm run build)");
  }
  const server = http.createServer((request, response) => {
    const file = request.method === "GET" ? fileFor(new URL(request.url, "http://x").pathname, folder) : null;
    if (!file) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    response.writeHead(200, { "content-type": TYPES[extname(file)], "cache-control": "no-store" });
    response.end(readFileSync(file));
  });
  return new Promise((ready) =>
    server.listen(port, host, () =>
      ready({
        origin: `http://${host === "127.0.0.1" ? "localhost" : host}:${server.address().port}`,
        close: () => new Promise((done) => server.close(done)),
      }),
    ),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { origin } = await serve(Number(process.argv[2] ?? 8090));
  console.log(`Notes: ${origin}/`);
}
