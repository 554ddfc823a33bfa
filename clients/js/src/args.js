// What the SDK's calls take where a record or a link is meant. A record as
// the SDK answered it is taken for its link; anything else that does not fit
// is a TypeError naming the call and the argument, thrown before any request
// (never a request to `…/records/localhost/%5Bobject%20Object%5D`).

const RECORD_ID = /^[0-9a-f]{32}$/;
const VERSION_HASH = /^[0-9a-f]{64}$/;

const isRecord = (given) =>
  typeof given === "object" && given !== null && typeof given.id === "string" && typeof given.author?.entity === "string";

/** A short picture of a wrong argument for the error's message. */
function shown(given) {
  if (given === undefined) return "undefined";
  try {
    const text = JSON.stringify(given);
    return text.length > 80 ? `${text.slice(0, 80)}…` : text;
  } catch {
    return String(given);
  }
}

/**
 * `{entity, record_id}` from a record id (of `entity`), a record, or a
 * record or version link.
 */
export function recordKey(given, where, entity) {
  if (typeof given === "string" && RECORD_ID.test(given)) return { entity, record_id: given };
  if (isRecord(given) && RECORD_ID.test(given.id)) return { entity: given.author.entity, record_id: given.id };
  if (typeof given?.entity === "string" && RECORD_ID.test(given?.record_id ?? "")) {
    return { entity: given.entity, record_id: given.record_id };
  }
  throw new TypeError(`${where}: expected a record id (32 lowercase hex characters), a record or a link; got ${shown(given)}`);
}

/** A version link, from a version link or a record (the version it is). */
export function versionKey(given, where) {
  if (isRecord(given) && VERSION_HASH.test(given.version?.hash ?? "")) {
    return { entity: given.author.entity, record_id: given.id, version_hash: given.version.hash };
  }
  if (typeof given?.entity === "string" && RECORD_ID.test(given?.record_id ?? "") && VERSION_HASH.test(given?.version_hash ?? "")) {
    return { entity: given.entity, record_id: given.record_id, version_hash: given.version_hash };
  }
  throw new TypeError(`${where}: expected a version link {entity, record_id, version_hash} or a record; got ${shown(given)}`);
}

/** A record as the SDK answered it, for a call that names the version it replaces. */
export function answeredRecord(given, where) {
  if (isRecord(given) && VERSION_HASH.test(given.version?.hash ?? "")) return given;
  throw new TypeError(`${where}: expected a record as the SDK answered it (with id, author and version); got ${shown(given)}`);
}

/** An object argument (`changes`, a body). */
export function object(given, where) {
  if (typeof given === "object" && given !== null && !Array.isArray(given)) return given;
  throw new TypeError(`${where}: expected an object; got ${shown(given)}`);
}
