// Serves Messages as static files, as examples/notes/serve.mjs serves
// Notes: this folder at `/`, the SDK at `/sdk/`.
//
//   node examples/messages/serve.mjs [PORT]      (default 8091)
import { fileURLToPath } from "node:url";
import { serve as serveFolder } from "../notes/serve.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));

/** Starts the server; resolves to `{origin, close}`. */
export const serve = (port = 8091, host = "127.0.0.1") => serveFolder(port, host, here);

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { origin } = await serve(Number(process.argv[2] ?? 8091));
  console.log(`Messages: ${origin}/`);
}
