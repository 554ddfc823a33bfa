// A connection to one user's store: discovery from an entity, signed
// requests to the endpoints its Entity record names, problems as errors.
import { FolioError } from "./errors.js";
import { Blobs } from "./blobs.js";
import { Events } from "./events.js";
import { Records } from "./records.js";
import { loadCore } from "./core.js";
import { IN_BROWSER } from "./runtime.js";
import { authorize } from "./signing.js";
import { transport } from "./transport.js";

// Header and relation names of each dialect (PROTOCOL.md §1).
const DIALECTS = {
  svc: {
    clientId: "x-svc-client-id",
    contentSha256: "x-svc-content-sha256",
    entityRelation: "https://folio.dev/rels/entity-record",
  },
  baq: {
    clientId: "x-baq-client-id",
    contentSha256: "x-baq-content-sha256",
    entityRelation: "https://baq.dev/rels/entity-record",
  },
};


/** The URL an entity is served at: `https://{entity}/`, or the URL given. */
function entityUrl(entity) {
  return /^https?:\/\//.test(entity) ? new URL(entity) : new URL(`https://${entity}/`);
}

/** The target of the `Link` header's link with relation `rel`, if any. */
function linkTarget(header, rel, base) {
  for (const part of (header ?? "").split(",")) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (match && /;\s*rel="?([^";]*)"?/.exec(match[2])?.[1] === rel) {
      return new URL(match[1], base);
    }
  }
  return null;
}

/** The longest `Retry-After` the client waits out by itself; past it, the error goes to the app. */
export const MAX_RETRY_AFTER_MS = 30_000;

/** How long a `429` or `503` asks to wait, if it is one and says so within reason. */
function retryAfterMs(response) {
  if (response.status !== 429 && response.status !== 503) return null;
  const seconds = Number(response.headers.get("retry-after"));
  if (!Number.isFinite(seconds) || seconds < 0 || seconds * 1000 > MAX_RETRY_AFTER_MS) return null;
  return seconds * 1000;
}


/** Fills `{name}` in an endpoint template. */
export function expand(template, values) {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name) => {
    if (!(name in values)) throw new TypeError(`no value for {${name}} in ${template}`);
    return encodeURIComponent(values[name]);
  });
}

/**
 * A user's store, as one app sees it.
 *
 * `app` is `{appId, authorizationId, key}` (an {@link AppKey}); without it
 * the client reads what is public only.
 */
export class Folio {
  constructor({
    entity,
    endpoints,
    app = null,
    dialect = "svc",
    clientId = null,
    verify = true,
    signBodies = !IN_BROWSER,
    retries = 2,
    fetch = undefined,
  }) {
    this.entity = entity;
    this.endpoints = endpoints;
    this.app = app;
    this.dialect = dialect;
    this.names = DIALECTS[dialect];
    if (!this.names) throw new TypeError(`unknown dialect ${dialect}`);
    this.clientId = clientId;
    /** Whether every record received is checked against its version hash. */
    this.verify = verify;
    /** Whether a body's SHA-256 is sent and signed (see {@link IN_BROWSER}). */
    this.signBodies = signBodies;
    /** How many times a `429` or `503` is retried after its `Retry-After`. */
    this.retries = retries;
    // Called as a plain function: a browser's fetch refuses any other `this`.
    this.fetch = (input, init) => (fetch ?? globalThis.fetch)(input, init);
    // Answers read whole: through node:https in node unless the app gave
    // its own fetch (transport.js).
    this.sendWhole = transport(this.fetch, fetch !== undefined);
    this.records = new Records(this);
    this.events = new Events(this);
    this.blobs = new Blobs(this);
  }

  /**
   * Finds `entity`'s store (`HEAD` on the entity's host, then its Entity
   * record) and connects to it. `entity` is a name (`alice.example`) or the
   * URL it is served at.
   */
  static async connect({ entity, app = null, dialect = "svc", clientId = null, verify = true, signBodies, retries, fetch }) {
    const names = DIALECTS[dialect];
    if (!names) throw new TypeError(`unknown dialect ${dialect}`);
    const given = fetch;
    fetch ??= (input, init) => globalThis.fetch(input, init);
    const home = entityUrl(entity);
    const head = await fetch(home, { method: "HEAD" });
    const recordUrl = linkTarget(head.headers.get("link"), names.entityRelation, home);
    if (!recordUrl) {
      throw new FolioError({ status: head.status, code: "not_an_entity", title: `${home} names no Entity record` });
    }
    const answer = await fetch(recordUrl);
    if (!answer.ok) throw await FolioError.from(answer);
    const { record } = await answer.json();
    const server = [...(record?.content?.servers ?? [])].sort((a, b) => a.preference - b.preference)[0];
    if (!server?.endpoints) {
      throw new FolioError({ status: answer.status, code: "no_endpoints", title: "the Entity record names no server" });
    }
    return new Folio({ entity: record.content.entity, endpoints: server.endpoints, app, dialect, clientId, verify, signBodies, retries, fetch: given });
  }

  /** The URL of endpoint `name` with its template filled. */
  url(name, values = {}) {
    const template = this.endpoints[name];
    if (!template) throw new TypeError(`the server names no ${name} endpoint`);
    return new URL(expand(template, values));
  }

  /**
   * Sends a request, signed when the client has an app; answers the parsed
   * JSON body (or `null` for an empty one), or throws a {@link FolioError}.
   */
  async request(method, url, options = {}) {
    const text = await this.requestText(method, url, options);
    return text === "" ? null : JSON.parse(text);
  }

  /**
   * {@link request}, answering the body's text as received: for a check
   * of what the server sent (version hashes) before it is parsed.
   */
  async requestText(method, url, options = {}) {
    for (let attempt = 1; ; attempt += 1) {
      const answer = await this.sendWhole(url, await this.prepare(method, url, options));
      if (answer.ok) return answer.text;
      // A rate limit or a busy server says when to come back: within
      // reason, the request is signed afresh and sent again then.
      const wait = retryAfterMs(answer);
      if (wait === null || attempt > this.retries) throw await FolioError.from(answer.response());
      await new Promise((resume) => setTimeout(resume, wait));
    }
  }

  /**
   * Sends a request and answers the raw `Response`, whatever its status.
   * `sign` names headers of `headers` (lowercase) to sign besides the body
   * digest and the client id; `signal` aborts it.
   */
  async send(method, url, options = {}) {
    return this.fetch(url, await this.prepare(method, url, options));
  }

  /**
   * What {@link send} sends: the request's `fetch` options, its body
   * digested and its headers signed.
   */
  async prepare(method, url, { body = undefined, headers = {}, sign = [], signed = true, signal } = {}) {
    const sent = { ...headers };
    const signedHeaders = sign.map((name) => [name, headers[name]]);
    let payload;
    if (body !== undefined) {
      payload = body instanceof Uint8Array ? body : new TextEncoder().encode(JSON.stringify(body));
      if (!(body instanceof Uint8Array)) sent["content-type"] = "application/json";
      if (this.signBodies) {
        sent[this.names.contentSha256] = (await loadCore()).sha256Hex(payload);
        signedHeaders.push([this.names.contentSha256, sent[this.names.contentSha256]]);
      }
    }
    if (this.clientId) {
      sent[this.names.clientId] = this.clientId;
      signedHeaders.push([this.names.clientId, this.clientId]);
    }
    if (signed && this.app) {
      sent.authorization = await authorize({
        key: this.app.key,
        appId: this.app.appId,
        authorizationId: this.app.authorizationId,
        method,
        url,
        headers: signedHeaders,
        dialect: this.dialect,
      });
    }
    return { method, headers: sent, body: payload, signal };
  }
}
