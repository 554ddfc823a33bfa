-- Generated from folio_core::store::MIGRATIONS (version 7) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- Versions found by hash within their record. Every lookup of a version by
-- its hash knows its record (a record's latest version, an event's
-- version, an exact version link), so `(record_row, hash)` finds it as
-- `(user_id, hash)` did; and where `(user_id, hash)` placed each new
-- version at random by its hash, a new record's first version is appended
-- (rows only grow) and a record's later versions stay beside it: a create
-- writes one B-tree entry with a random key fewer, and an update one fewer
-- scattered page.
CREATE UNIQUE INDEX versions_by_record_hash ON versions (record_row, hash);

-- An event names its version's record row, so that the log reads its
-- versions through the same index.
ALTER TABLE events ADD COLUMN record_row INTEGER NOT NULL DEFAULT 0;
UPDATE events SET record_row = (
    SELECT v.record_row FROM versions v
    WHERE v.user_id = events.user_id AND v.hash = events.version_hash
);

-- A record's latest version is its own row's version of that hash. The
-- foreign key says so through the new index (SQLite changes a table's
-- constraints only by building the table again); the old one, by
-- `(user_id, version_hash)`, also looked each written row's version up
-- at random.
CREATE TABLE records_v7 (
    row INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    author TEXT NOT NULL,
    record_id TEXT NOT NULL,
    source TEXT NOT NULL,
    type_entity TEXT NOT NULL,
    type_record_id TEXT NOT NULL,
    type_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    version_hash TEXT NOT NULL,
    version_created_at INTEGER NOT NULL,
    version_received_at INTEGER NOT NULL,
    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    public INTEGER NOT NULL CHECK (public IN (0, 1)),
    version_author TEXT NOT NULL DEFAULT '',
    UNIQUE (user_id, author, record_id),
    FOREIGN KEY (row, version_hash) REFERENCES versions (record_row, hash)
) STRICT;
INSERT INTO records_v7 SELECT row, user_id, author, record_id, source, type_entity,
    type_record_id, type_hash, created_at, received_at, version_hash, version_created_at,
    version_received_at, deleted, public, version_author FROM records;
DROP TABLE records;
ALTER TABLE records_v7 RENAME TO records;
CREATE INDEX records_by_received_at ON records (user_id, received_at, record_id, author);
CREATE INDEX records_by_created_at ON records (user_id, created_at, record_id, author);
CREATE INDEX records_by_version_received_at
    ON records (user_id, version_received_at, record_id, author);
CREATE INDEX records_by_version_created_at
    ON records (user_id, version_created_at, record_id, author);
CREATE INDEX records_by_type ON records (
    user_id, type_record_id, type_entity, received_at, record_id, author
);

DROP INDEX versions_by_hash;
