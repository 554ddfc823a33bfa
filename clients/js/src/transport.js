// How a request whose answer is read whole reaches the server: in node,
// through node:https (node:http for `http:`) on keep-alive connections; in a
// browser, or with a `fetch` the app gave, through that fetch.
//
// Measured on one machine against one `folio serve`, sequential requests
// on one connection: undici's fetch took 0.555 ms a round trip where
// node:https took 0.282 (clients/js/bench/roundtrip.mjs for the SDK's
// whole figures). Streams (live events, blob bytes) still go through fetch.

import { IN_NODE } from "./runtime.js";

let modules;

/** node:http and node:https, each with one keep-alive agent, loaded once. */
function nodeModules() {
  modules ??= Promise.all([import("node:http"), import("node:https")]).then(([http, https]) => ({
    "http:": { request: http.request, agent: new http.Agent({ keepAlive: true }) },
    "https:": { request: https.request, agent: new https.Agent({ keepAlive: true }) },
  }));
  return modules;
}

/**
 * An answer read whole: `status`, `ok`, `headers.get(name)` and `text`, as
 * much of a `Response` as the SDK reads; `response()` makes a real one (for
 * {@link FolioError.from}).
 */
class WholeAnswer {
  constructor(status, headers, text) {
    this.status = status;
    this.ok = status >= 200 && status < 300;
    this.headers = new Headers();
    for (const [name, value] of Object.entries(headers)) {
      for (const item of [value].flat()) this.headers.append(name, item);
    }
    this.text = text;
  }

  response() {
    return new Response(this.text, { status: this.status, headers: this.headers });
  }
}

/**
 * A transport for `fetch`: `send(url, {method, headers, body, signal})`
 * answers a {@link WholeAnswer}. The node one is used only when the app
 * left `fetch` to the SDK (`custom` false) and this is node.
 */
export function transport(fetch, custom) {
  if (IN_NODE && !custom) return sendWithNode;
  return async (url, init) => {
    const raw = await fetch(url, init);
    return new WholeAnswer(raw.status, Object.fromEntries(raw.headers), await raw.text());
  };
}

async function sendWithNode(url, { method, headers, body, signal }) {
  const client = (await nodeModules())[url.protocol];
  if (!client) throw new TypeError(`cannot send to ${url.protocol} URLs`);
  // Framed by its length: node sends a DELETE's body unframed otherwise
  // (no chunked encoding for DELETE), and the server would not see it.
  const framed = body === undefined ? headers : { ...headers, "content-length": String(body.byteLength) };
  return new Promise((answered, failed) => {
    const request = client.request(url, { method, headers: framed, agent: client.agent, signal }, (response) => {
      const chunks = [];
      response.on("data", (chunk) => chunks.push(chunk));
      response.on("error", failed);
      response.on("end", () => {
        const text = new TextDecoder().decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
        answered(new WholeAnswer(response.statusCode, response.headers, text));
      });
    });
    request.on("error", failed);
    request.setNoDelay(true);
    request.end(body);
  });
}
