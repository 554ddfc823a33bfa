// Records: create, read, update, delete, versions, and lists paged through
// `next_page` (spec §4, PROTOCOL.md §5 and §7).
import { loadCore } from "./core.js";
import { answeredRecord, object, recordKey, versionKey } from "./args.js";
import { FolioError } from "./errors.js";
import { and, author, toFilter, type } from "./filter.js";

/**
 * Checks that each record's version hash is what its content and metadata
 * come to, by the same code as the server's; a record changed on the way
 * (or by a server that lies) is a FolioError `hash_mismatch`.
 */
export async function verified(records) {
  await verifiedAnswer(JSON.stringify({ records }));
  return records;
}

/**
 * Checks the version hash of every record in an answer's text, as
 * received (`record` or `records`, and `linked_records`), with one call
 * into the core, before the text is parsed: a FolioError `hash_mismatch`
 * names the first record that does not match.
 */
async function verifiedAnswer(text) {
  const mismatch = (await loadCore()).checkVersionHashes(text);
  if (mismatch) {
    throw new FolioError({
      status: 0,
      code: "hash_mismatch",
      title: "a record's version hash does not match its content",
      detail: mismatch,
    });
  }
}

/** A record's link: `{entity, record_id}`. */
export function recordLink(record) {
  return { entity: record.author.entity, record_id: record.id };
}

/** A version link to this version of a record: `{entity, record_id, version_hash}`. */
export function versionLink(record) {
  return { entity: record.author.entity, record_id: record.id, version_hash: record.version.hash };
}

// Percent-encoding only: the server decodes `+` as `+` (PROTOCOL.md §7).
function query(parameters) {
  const parts = [];
  for (const [name, given] of Object.entries(parameters)) {
    for (const item of Array.isArray(given) ? given : [given]) {
      if (item !== undefined && item !== null) parts.push(`${name}=${encodeURIComponent(item)}`);
    }
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

/** One page of a list: its records, the records they link, and the next page. */
export class Page {
  constructor({ answer, next }) {
    this.records = answer.records;
    /** The records `include_links` asked for, by `entity+record_id`. */
    this.linked = new Map(answer.linked_records.map((r) => [`${r.author.entity}+${r.id}`, r]));
    this.nextPage = answer.next_page ?? null;
    this._next = next;
  }

  /** The linked record a link (`{entity, record_id}`) points to, if it was included. */
  linkedRecord(link) {
    return this.linked.get(`${link.entity}+${link.record_id}`) ?? null;
  }

  /** The next page, or `null` after the last. */
  async next() {
    return this.nextPage === null ? null : this._next(this.nextPage);
  }
}

export class Records {
  constructor(folio) {
    this.folio = folio;
  }

  /**
   * Checks `body` (`{type, content, permissions?}`) against its Type
   * record's schema with the core, before any write: a violation is the
   * FolioError `schema_violation` the server would answer, with the JSON
   * path in its detail. The Type record is read once per version.
   */
  async validate(body) {
    object(body, "records.validate(body)");
    const type = versionKey(body.type, "records.validate(body): body.type");
    body = { ...body, type };
    const { checker } = await this._type(type);
    let violation;
    try {
      violation = checker?.check(JSON.stringify(body), this.folio.entity);
    } catch {
      // A body the core cannot read as a record: the server will say what is wrong.
      return;
    }
    if (violation) {
      throw new FolioError({
        status: 400,
        code: "schema_violation",
        title: "The record does not follow its type's schema",
        detail: violation,
      });
    }
  }

  /**
   * A Type record's version, read once: `{record, checker}`, its schema
   * compiled once by the core (`checker` is null for a schema the core
   * cannot compile: the server will say what is wrong).
   */
  async _type(type) {
    const key = `${type.entity}+${type.record_id}+${type.version_hash}`;
    this._types ??= new Map();
    if (!this._types.has(key)) {
      const url = this.folio.url("record_version", {
        entity: type.entity,
        record_id: type.record_id,
        version_hash: type.version_hash,
      });
      const loading = (async () => {
        const [core, { record }] = await Promise.all([loadCore(), this._answer("GET", url)]);
        let checker = null;
        try {
          checker = new core.TypeChecker(JSON.stringify(record));
        } catch {
          // Not a schema the core compiles: nothing is checked before the write.
        }
        return { record, checker };
      })();
      loading.catch(() => this._types.delete(key));
      this._types.set(key, loading);
    }
    return this._types.get(key);
  }

  /**
   * Creates a record: `{type, content, permissions?, id?, created_at?}`
   * (`type` a version link to its Type record), checked against its type
   * first unless `validate` is false. Answers the record.
   */
  async create(body, { validate = true } = {}) {
    object(body, "records.create(body)");
    if (body.type !== undefined) body = { ...body, type: versionKey(body.type, "records.create(body): body.type") };
    if (validate && body.type) await this.validate(body);
    return (await this._answer("POST", this.folio.url("new_record"), { body })).record;
  }

  /**
   * A record of `entity` (default: the store's own), as the store holds it.
   * With `proxyTo` (the record's author, so `entity` again), the user's
   * server asks the author's server for it instead, signed as the user, and
   * answers it with `source: "proxy"` without storing it: a record of
   * someone the store has not heard from (docs/federation.md §5).
   */
  async get(id, { entity = this.folio.entity, includeLinks, proxyTo } = {}) {
    const url = this.folio.url("record", recordKey(id, "records.get(id)", entity));
    url.search = query({ include_links: includeLinks?.join(","), proxy_to: proxyTo });
    return (await this._answer("GET", url)).record;
  }

  /**
   * A new version of `record` with `changes` (`content`, and optionally
   * `permissions`, `type`): refused with `version_conflict` if someone
   * wrote a version since `record` was read.
   */
  async update(record, changes, { validate = true } = {}) {
    answeredRecord(record, "records.update(record, changes): record");
    object(changes, "records.update(record, changes): changes");
    if (validate) {
      await this.validate({
        type: changes.type ?? record.type,
        content: changes.content,
        permissions: changes.permissions ?? record.permissions,
      });
    }
    const url = this.folio.url("record", { entity: record.author.entity, record_id: record.id });
    const body = { ...changes, version: { ...changes.version, parent_hash: record.version.hash } };
    return (await this._answer("PUT", url, { body })).record;
  }

  /**
   * Deletes `record` (its latest version must be this one); `action` is
   * `delete` (the default), `local` or `leave`. Answers the tombstone.
   */
  async delete(record, { action = "delete" } = {}) {
    answeredRecord(record, "records.delete(record)");
    const url = this.folio.url("record", { entity: record.author.entity, record_id: record.id });
    const body = { version: { parent_hash: record.version.hash }, no_content: { action } };
    return (await this._answer("DELETE", url, { body })).record;
  }

  /**
   * A record with the records `includeLinks` asks for (JSON paths of its
   * links, `entity`, `existential`): `{record, linked, linkedRecord(link)}`,
   * `linked` by `entity+record_id`. `proxyTo` as for {@link get}.
   */
  async getWithLinks(id, { entity = this.folio.entity, includeLinks = [], proxyTo } = {}) {
    const url = this.folio.url("record", recordKey(id, "records.getWithLinks(id)", entity));
    url.search = query({ include_links: includeLinks.join(","), proxy_to: proxyTo });
    const answer = await this._answer("GET", url);
    const record = answer.record;
    const linked = new Map(answer.linked_records.map((r) => [`${r.author.entity}+${r.id}`, r]));
    return { record, linked, linkedRecord: (link) => linked.get(`${link.entity}+${link.record_id}`) ?? null };
  }

  /** Every version of a record, oldest first. */
  async versions(id, { entity = this.folio.entity } = {}) {
    const url = this.folio.url("record_versions", recordKey(id, "records.versions(id)", entity));
    const versions = [];
    for (let page = await this._page(url); page; page = await page.next()) {
      versions.push(...page.records);
    }
    return versions;
  }

  /**
   * The first page of a list: `{filter, search, sort, pageSize, includeLinks,
   * includeDeleted, distinct, sources, proxyTo}`. `filter` is a condition from `filter.js`,
   * a string in the protocol's grammar, or an array of them (any matches).
   * `search` is words the records must all hold in their text (a Folio
   * extension, docs/search.md): without `sort`, the best matches first, in
   * one page; with one, every match in that order, page after page.
   * With `proxyTo` (an entity), the list is `proxyTo`'s own records that the
   * user may read there, asked of its server by the user's server and
   * answered with `source: "proxy"`, not stored; the next pages ask it too
   * (docs/federation.md §5).
   */
  async page({ filter, search, sort, pageSize, includeLinks, includeDeleted, distinct, sources, proxyTo } = {}) {
    const url = this.folio.url("records");
    const filters = filter === undefined ? undefined : [filter].flat().map(toFilter);
    url.search = query({
      filter: filters,
      search,
      sort,
      page_size: pageSize,
      include_links: includeLinks?.join(","),
      include_deleted: includeDeleted,
      distinct,
      sources: sources?.join(","),
      proxy_to: proxyTo,
    });
    return this._page(url);
  }

  /**
   * A version link to the built-in Type record named `name` (`type`,
   * `entity`, `app`, …): what `type` is for a new Type record.
   */
  async builtinType(name) {
    this._builtins ??= this.page({ sources: ["resolution"], pageSize: 200 }).then((page) =>
      new Map(page.records.map((record) => [record.content?.name, versionLink(record)])),
    );
    const link = (await this._builtins).get(name);
    if (!link) throw new TypeError(`the server has no built-in type named ${name}`);
    return link;
  }

  /**
   * The user's record type named `content.name`, brought to `content`: the same content again is
   * the type already there (nothing is written), changed content is a new version of it (records
   * keep the version they were written under), and a name no type of the user's has yet makes a
   * new Type record. Running an app's setup twice thus leaves one type. A name several of the
   * user's types share (stores from before this rule) is refused, naming them. As `folio type add`
   * decides (core's `TypeAddition`). Answers a version link to the type's latest version.
   */
  async ensureType(content) {
    if (typeof content?.name !== "string") throw new TypeError("ensureType(content): content.name is the type's name");
    const typeType = await this.builtinType("type");
    const own = and(type(typeType), author(this.folio.entity));
    const sameName = [];
    for await (const record of this.list({ filter: own, pageSize: 200 })) {
      if (record.content?.name === content.name) sameName.push(record);
    }
    const same = sameName.find((record) => sameJson(record.content, content));
    if (same) return versionLink(same);
    if (sameName.length > 1) {
      const ids = sameName.map((record) => `${record.author.entity}+${record.id}`).join(", ");
      throw new Error(`${sameName.length} types are named ${content.name} (${ids}): delete the ones not meant, or name this one otherwise`);
    }
    if (sameName.length === 1) return versionLink(await this.update(sameName[0], { content }));
    return versionLink(await this.create({ type: typeType, content }));
  }

  /** Every record of a list, page after page (`for await … of`). */
  async *list(options = {}) {
    for (let page = await this.page(options); page; page = await page.next()) {
      yield* page.records;
    }
  }

  /**
   * A request's answer, its records' version hashes checked on the text
   * as received (unless the client was made with `verify: false`), then
   * parsed.
   */
  async _answer(method, url, options) {
    const text = await this.folio.requestText(method, url, options);
    if (this.folio.verify) await verifiedAnswer(text);
    return JSON.parse(text);
  }

  async _page(url) {
    const answer = await this._answer("GET", url);
    const next = (nextPage) => {
      const following = new URL(url);
      following.search = nextPage;
      return this._page(following);
    };
    return new Page({ answer, next });
  }
}

/** Whether two JSON values are equal, whatever the order of their objects' keys. */
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]));
}
