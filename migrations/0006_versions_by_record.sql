-- Generated from folio_core::store::MIGRATIONS (version 6) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- Versions found through their record's row. A record's history is one
-- range of `versions_by_record`, in receipt order, and a new record's
-- first version is appended to it (rows only grow), where the one-child
-- index placed it by its random id: a create now writes one B-tree entry
-- with a random key fewer.
--
-- The one-child index holds only versions with a parent, by their
-- record's row, so that the versions of one record stay together in it (a
-- parent's hash alone would place each update at random). A record still
-- has one first version only: that version inserts the record's row, and
-- a second insert of the same record fails on the records' unique key.
ALTER TABLE versions ADD COLUMN record_row INTEGER NOT NULL DEFAULT 0;
UPDATE versions SET record_row = (
    SELECT r.row FROM records r
    WHERE r.user_id = versions.user_id AND r.author = versions.author
    AND r.record_id = versions.record_id
);
DROP INDEX versions_one_child;
CREATE UNIQUE INDEX versions_one_child ON versions (record_row, parent_hash)
    WHERE parent_hash != '';
CREATE INDEX versions_by_record ON versions (record_row, received_at);
