// Live events (spec §6, PROTOCOL.md §8): a subscription reads the server's
// event stream, hands each record on once, and when the stream breaks
// (a network failure, a server restart, a heartbeat that stops coming) it
// reconnects with `Last-Event-Id`, so the server sends what was missed,
// after a growing pause. Problems that reconnecting cannot mend
// (`too_many_events`, an app not allowed to subscribe) end it.
import { FolioError } from "./errors.js";
import { toFilter } from "./filter.js";
import { verified } from "./records.js";

/** The server's heartbeat comes every 15 s of silence; this long without a byte means the stream is gone. */
export const HEARTBEAT_TIMEOUT_MS = 40_000;
/** The first pause before reconnecting, doubled each time up to {@link MAX_BACKOFF_MS}. */
export const FIRST_BACKOFF_MS = 250;
export const MAX_BACKOFF_MS = 30_000;

// Refusals that the same request would meet again.
const FATAL = new Set([400, 401, 403, 404]);

/** One event of a `text/event-stream`, from its block of lines. */
function parseEvent(block) {
  const event = { id: null, event: "message", data: [] };
  for (const line of block.split(/\r?\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") event.data.push(value);
    else if (field === "id") event.id = value;
    else if (field === "event") event.event = value;
  }
  return { ...event, data: event.data.join("\n") };
}

const sleep = (ms, signal) =>
  new Promise((done) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); done(); }, { once: true });
  });

/**
 * A live subscription: an async iterable of records (`for await`), with
 * `close()`. `lastEventId` is where it would resume.
 */
export class Subscription {
  constructor(folio, url, { onOpen = () => {}, onError = () => {}, lastEventId = null } = {}) {
    this.folio = folio;
    this.url = url;
    this.lastEventId = lastEventId;
    this.onOpen = onOpen;
    this.onError = onError;
    this.closed = new AbortController();
    this.queue = [];
    this.waiting = null;
    this.failure = null;
    this.connections = 0;
    this.done = this.run();
  }

  /** Ends the subscription and its connection. */
  close() {
    this.closed.abort();
    this.wake();
  }

  wake() {
    this.waiting?.();
    this.waiting = null;
  }

  async run() {
    let backoff = FIRST_BACKOFF_MS;
    while (!this.closed.signal.aborted) {
      try {
        if (await this.connect()) backoff = FIRST_BACKOFF_MS;
      } catch (error) {
        if (this.closed.signal.aborted) break;
        if (error instanceof FolioError && FATAL.has(error.status)) {
          this.failure = error;
          break;
        }
        this.onError(error);
      }
      if (this.closed.signal.aborted) break;
      // A little randomness, so clients cut off together do not return together.
      await sleep(backoff * (0.5 + Math.random() / 2), this.closed.signal);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
    this.closed.abort();
    this.wake();
  }

  /** One connection, read until it ends; whether it delivered anything. */
  async connect() {
    const connection = new AbortController();
    const abort = () => connection.abort();
    this.closed.signal.addEventListener("abort", abort, { once: true });
    let silence;
    const watch = () => {
      clearTimeout(silence);
      silence = setTimeout(abort, HEARTBEAT_TIMEOUT_MS);
    };
    let delivered = false;
    try {
      const headers = { accept: "text/event-stream" };
      const sign = [];
      if (this.lastEventId !== null) {
        headers["last-event-id"] = this.lastEventId;
        sign.push("last-event-id");
      }
      watch();
      const response = await this.folio.send("GET", this.url, { headers, sign, signal: connection.signal });
      if (!response.ok) throw await FolioError.from(response);
      this.connections += 1;
      this.onOpen();
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of response.body) {
        watch();
        buffer += decoder.decode(chunk, { stream: true });
        let end;
        while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
          const event = parseEvent(block);
          if (event.id !== null) this.lastEventId = event.id;
          if (event.event === "record") {
            const record = JSON.parse(event.data);
            if (this.folio.verify) await verified([record]);
            this.queue.push(record);
            delivered = true;
            this.wake();
          }
        }
      }
      return delivered;
    } catch (error) {
      if (connection.signal.aborted && !this.closed.signal.aborted) {
        this.onError(new Error("the event stream went silent; reconnecting"));
        return delivered;
      }
      throw error;
    } finally {
      clearTimeout(silence);
      this.closed.signal.removeEventListener("abort", abort);
      connection.abort();
    }
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.queue.length > 0) {
        yield this.queue.shift();
        continue;
      }
      if (this.closed.signal.aborted) {
        if (this.failure) throw this.failure;
        return;
      }
      await new Promise((wake) => { this.waiting = wake; });
    }
  }
}

export class Events {
  constructor(folio) {
    this.folio = folio;
  }

  /**
   * Subscribes to the records matching `filter` (as for lists) written from
   * now on, and to those written since `min` (a RecordDate, at most 20 s
   * back) or since the event `lastEventId`. With a `clientId` on the
   * client, its own writes are not sent back.
   */
  subscribe({ filter, includeDeleted, min, lastEventId = null, onOpen, onError } = {}) {
    const url = this.folio.url("events");
    const parts = [];
    for (const condition of filter === undefined ? [] : [filter].flat()) {
      parts.push(`filter=${encodeURIComponent(toFilter(condition))}`);
    }
    if (includeDeleted) parts.push("include_deleted=true");
    if (min) parts.push(`min=${encodeURIComponent(JSON.stringify(min))}`);
    url.search = parts.length ? `?${parts.join("&")}` : "";
    return new Subscription(this.folio, url, { onOpen, onError, lastEventId });
  }
}
