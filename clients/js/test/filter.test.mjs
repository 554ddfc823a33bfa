// The filter builder writes the protocol's grammar: the same text as the
// filters of ../shared/vectors/filters.json it can express.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { filter as f } from "../src/index.js";

const vectors = JSON.parse(
  await readFile(new URL("../../../../shared/vectors/filters.json", import.meta.url), "utf8"),
);
const text = (name) => vectors.find((v) => v.name === name).filter;

const type = (id) => f.at("type", f.value.record({ entity: "types.baq.dev", record_id: id }));
const folder = "3050fc130d4142a9994af0ef7c89099e";
const file = "2b6f7bc8ffd54c8db8062700c040e04f";

test("nesting flips between and and or, as the grammar's parentheses do", () => {
  assert.equal(
    f.toFilter(f.and(f.author("alice.baq.run"), f.or(type(folder), type(file)))),
    text("nesting-one-level"),
  );
  assert.equal(
    f.toFilter(
      f.and(f.author("alice.baq.run"), f.or(f.at("content.parent", null), f.and(type(folder), f.any(f.value.tag("folder"))))),
    ),
    text("nesting-two-levels"),
  );
  assert.equal(f.toFilter(f.or(f.author("alice.baq.run"), f.author("bob.baq.run"))), text("nesting-single-top-level-group"));
});

test("values: entities, records, versions and tags, JSON-quoted", () => {
  assert.equal(f.toFilter(f.any(f.value.entity("entity.host.com"))), text("sdk-test-any-link-entity"));
  const record = { entity: "entity.host.com", record_id: "237d3e8518f64a7ea84397b32ba9182b" };
  assert.equal(f.toFilter(f.any(f.value.record(record))), text("sdk-test-any-link-record"));
  const version = { ...record, version_hash: "5218504fc52a48938e649debc1cadb2f43e05ffba9db4588bbe7b420603151e2" };
  assert.equal(f.toFilter(f.any(f.value.version(version))), text("sdk-test-any-link-version"));
  assert.equal(f.toFilter(f.at("content.title", f.value.tag('say "hi"\\ ok'))), text("tag-with-json-escapes"));
  assert.equal(f.toFilter(f.at(["content", "text_facets", "*", "mention"], f.value.entity("alice.baq.run"))),
    "$['content']['text_facets'][*]['mention']=alice.baq.run");
});

test("a raw filter passes as it is, and an empty group is refused", () => {
  assert.equal(f.toFilter("$['author']=alice.baq.run"), "$['author']=alice.baq.run");
  assert.equal(f.toFilter(f.raw("a.example,b.example")), "a.example,b.example");
  assert.throws(() => f.toFilter(f.or()), TypeError);
});
