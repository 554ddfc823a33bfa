-- Search (a Folio extension, docs/search.md): the words of each
-- record's latest version, weighted, found by word. A version keeps its
-- words (`[[word, weight], …]`) so that the next one removes exactly them.
-- Versions stored before this migration, and versions imported from an
-- archive, have none (NULL): the host's backfill reads them through
-- `versions_unsearched`, gives the latest of each record its words and the
-- others `[]`, and the index empties.
ALTER TABLE versions ADD COLUMN words TEXT;
CREATE TABLE record_words (
    user_id INTEGER NOT NULL,
    word TEXT NOT NULL,
    record_row INTEGER NOT NULL,
    weight INTEGER NOT NULL,
    PRIMARY KEY (user_id, word, record_row)
) STRICT, WITHOUT ROWID;
CREATE INDEX versions_unsearched ON versions (record_row) WHERE words IS NULL;
