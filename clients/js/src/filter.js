// The list filter grammar (spec §4.1, PROTOCOL.md §7), built from values
// instead of written by hand: conditions joined with `and` and `or` at any
// depth become the protocol's commas and parentheses.
import { recordKey, versionKey } from "./args.js";

/** A JSON path from `"content.parent"`, `["content", "parent"]` or `"$['content']['parent']"`. */
export function path(at) {
  if (typeof at === "string" && at.startsWith("$")) return at;
  const keys = Array.isArray(at) ? at : at.split(".");
  return "$" + keys.map((key) => (key === "*" ? "[*]" : `['${String(key).replace(/['\\]/g, "\\$&")}']`)).join("");
}

/** A link value in the filter's syntax. */
export const value = {
  /** An entity link: `alice.example`. */
  entity: (entity) => ({ text: entity }),
  /** A record link: `{entity, record_id}` (a record's link or a version link's record), or a record. */
  record: (link) => {
    const { entity, record_id } = recordKey(link, "filter.value.record(link)");
    return { text: `${entity}+${record_id}` };
  },
  /** A version link: `{entity, record_id, version_hash}`, or a record (the version it is). */
  version: (link) => {
    const { entity, record_id, version_hash } = versionKey(link, "filter.value.version(link)");
    return { text: `${entity}+${record_id}+${version_hash}` };
  },
  /** A tag: any string (quoted as JSON). */
  tag: (tag) => ({ text: JSON.stringify(String(tag)) }),
};

function valueText(v) {
  if (v && typeof v.text === "string") return v.text;
  throw new TypeError("a filter value is made with value.entity, .record, .version or .tag");
}

const leaf = (text) => ({ op: null, text });

/** Records with this value at `at` (`null`: with no value there). */
export function at(where, v) {
  return leaf(`${path(where)}=${v === null ? "" : valueText(v)}`);
}

/** Records with at least one link of this value. */
export function any(v) {
  return leaf(valueText(v));
}

/** Records of this type (a version link to its Type record). */
export function type(typeLink) {
  return at("type", value.record(typeLink));
}

/** Records by this author entity. */
export function author(entity) {
  return at("author", value.entity(entity));
}

/** Every condition holds. */
export function and(...conditions) {
  return { op: "and", children: conditions };
}

/** At least one condition holds. */
export function or(...conditions) {
  return { op: "or", children: conditions };
}

/** A filter written in the protocol's grammar, passed as it is. */
export function raw(text) {
  return leaf(String(text));
}

// Commas join at the current level's operator; a group in parentheses flips it.
function write(node, level) {
  if (node.op === null) return node.text;
  if (node.children.length === 0) throw new TypeError(`an empty ${node.op}()`);
  const inner = node.children.map((child) => write(child, node.op)).join(",");
  return node.op === level || node.children.length === 1 ? inner : `(${inner})`;
}

/** The filter parameter's text for a condition (the top level is `and`). */
export function toFilter(condition) {
  return typeof condition === "string" ? condition : write(condition, "and");
}
