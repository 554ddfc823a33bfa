// Records: create, read, update, delete, versions, and lists paged through
// `next_page` (spec §4, PROTOCOL.md §5 and §7).
import { toFilter } from "./filter.js";

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
   * Creates a record: `{type, content, permissions?, id?, created_at?}`
   * (`type` a version link to its Type record). Answers the record.
   */
  async create(body) {
    const answer = await this.folio.request("POST", this.folio.url("new_record"), { body });
    return answer.record;
  }

  /** A record of `entity` (default: the store's own), and the records it links. */
  async get(id, { entity = this.folio.entity, includeLinks } = {}) {
    const url = this.folio.url("record", { entity, record_id: id });
    url.search = query({ include_links: includeLinks?.join(",") });
    return (await this.folio.request("GET", url)).record;
  }

  /**
   * A new version of `record` with `changes` (`content`, and optionally
   * `permissions`, `type`): refused with `version_conflict` if someone
   * wrote a version since `record` was read.
   */
  async update(record, changes) {
    const url = this.folio.url("record", { entity: record.author.entity, record_id: record.id });
    const body = { ...changes, version: { ...changes.version, parent_hash: record.version.hash } };
    return (await this.folio.request("PUT", url, { body })).record;
  }

  /**
   * Deletes `record` (its latest version must be this one); `action` is
   * `delete` (the default), `local` or `leave`. Answers the tombstone.
   */
  async delete(record, { action = "delete" } = {}) {
    const url = this.folio.url("record", { entity: record.author.entity, record_id: record.id });
    const body = { version: { parent_hash: record.version.hash }, no_content: { action } };
    return (await this.folio.request("DELETE", url, { body })).record;
  }

  /** Every version of a record, oldest first. */
  async versions(id, { entity = this.folio.entity } = {}) {
    const url = this.folio.url("record_versions", { entity, record_id: id });
    const versions = [];
    for (let page = await this._page(url); page; page = await page.next()) {
      versions.push(...page.records);
    }
    return versions;
  }

  /**
   * The first page of a list: `{filter, sort, pageSize, includeLinks,
   * includeDeleted, distinct, sources}`. `filter` is a condition from `filter.js`,
   * a string in the protocol's grammar, or an array of them (any matches).
   */
  async page({ filter, sort, pageSize, includeLinks, includeDeleted, distinct, sources } = {}) {
    const url = this.folio.url("records");
    const filters = filter === undefined ? undefined : [filter].flat().map(toFilter);
    url.search = query({
      filter: filters,
      sort,
      page_size: pageSize,
      include_links: includeLinks?.join(","),
      include_deleted: includeDeleted,
      distinct,
      sources: sources?.join(","),
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

  /** Every record of a list, page after page (`for await … of`). */
  async *list(options = {}) {
    for (let page = await this.page(options); page; page = await page.next()) {
      yield* page.records;
    }
  }

  async _page(url) {
    const answer = await this.folio.request("GET", url);
    const next = (nextPage) => {
      const following = new URL(url);
      following.search = nextPage;
      return this._page(following);
    };
    return new Page({ answer, next });
  }
}
