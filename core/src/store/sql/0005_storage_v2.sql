-- Storage v2: fewer B-tree entries per write. A create of the benchmark's
-- record wrote 35 (versions and 3 indexes, records and 7, 7 link-index
-- entries in 3 B-trees each, events and 1); it now writes 15.
--
-- The envelope's author, version author and type are served from the
-- columns of `records`, not from the link index: they were 4 of a typical
-- record's 7 entries, each repeating a column.
ALTER TABLE records ADD COLUMN version_author TEXT NOT NULL DEFAULT '';
UPDATE records SET version_author = (
    SELECT json_extract(v.record, '$.version.author.entity') FROM versions v
    WHERE v.user_id = records.user_id AND v.hash = records.version_hash
);

-- A filter on a type and an author reads the type's index and checks the
-- author of each: a store's records are nearly all its owner's.
DROP INDEX records_by_type_author;

-- The link index is one B-tree, keyed by path. An entry is removed by its
-- exact key (the replaced version's entries name it), and a lookup by key
-- alone (a bare filter value, an existential cascade, a blob's linkers)
-- steps through the store's few distinct paths.
CREATE TABLE link_index_v2 (
    user_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    key TEXT NOT NULL,
    record_row INTEGER NOT NULL,
    PRIMARY KEY (user_id, path, key, record_row)
) STRICT, WITHOUT ROWID;
INSERT INTO link_index_v2 (user_id, path, key, record_row)
    SELECT user_id, path, key, record_row FROM link_index
    WHERE path NOT IN ('$[''author'']', '$[''version''][''author'']', '$[''type'']');
DROP TABLE link_index;
ALTER TABLE link_index_v2 RENAME TO link_index;

-- Events are found by sequence; pruning and a catch-up from a date step
-- through a user's events in sequence order, in which their receipt
-- dates also increase.
DROP INDEX events_by_received_at;
