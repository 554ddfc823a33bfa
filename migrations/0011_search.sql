-- Generated from folio_core::store::MIGRATIONS (version 11) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- Search (a Folio extension, docs/search.md): the text of each record's
-- latest version in SQLite's full-text index, FTS5, whose rowid is the
-- record's row. Contentless: the index keeps the words' postings, not the
-- text (the version holds it), and `contentless_delete` lets a row go by
-- its rowid alone when its record changes.
CREATE VIRTUAL TABLE record_text USING fts5(
    words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);

-- Versions stored before this migration, and versions imported from an
-- archive, were never indexed (`searched` NULL): upkeep's backfill reads
-- them through `versions_unsearched`, indexes the latest of each record,
-- marks them all, and the partial index empties.
ALTER TABLE versions ADD COLUMN searched INTEGER;
CREATE INDEX versions_unsearched ON versions (record_row) WHERE searched IS NULL;
