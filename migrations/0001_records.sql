-- Generated from folio_core::store::MIGRATIONS (version 1) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- Folio's storage: one schema for SQLite (the native host) and D1 (the
-- worker). Dates are INTEGER ticks of 100 ns since the Unix epoch; ids and
-- hashes are lowercase hex TEXT; entities are TEXT.
--
-- Each user has a separate record store: every table below is keyed by
-- `user_id` first, and every query binds it.

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    -- The `{user}` path segment.
    name TEXT NOT NULL UNIQUE,
    -- The entity the user's signed requests act as.
    entity TEXT NOT NULL UNIQUE,
    -- argon2id, for the consent page; NULL until set.
    password_hash TEXT,
    -- The last event sequence number handed out: event ids never repeat,
    -- even after old events are pruned.
    event_seq INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) STRICT;

-- Every version of every record, as served.
CREATE TABLE versions (
    user_id INTEGER NOT NULL REFERENCES users (id),
    hash TEXT NOT NULL,
    author TEXT NOT NULL,
    record_id TEXT NOT NULL,
    -- '' stands for a first version's missing parent, so that the unique
    -- index below also allows only one first version per record.
    parent_hash TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    -- The version's index entries, as a JSON array of [path, key]: events
    -- and catch-up match filters against the version itself.
    links TEXT NOT NULL,
    record TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX versions_by_hash ON versions (user_id, hash);
-- A version has at most one child: two writers that start from the same
-- parent cannot both commit, on any host.
CREATE UNIQUE INDEX versions_one_child ON versions (user_id, author, record_id, parent_hash);
-- `version.received_at` is a total order per user (paging, events).
CREATE UNIQUE INDEX versions_by_received_at ON versions (user_id, received_at);
-- ... and it only grows: a writer that computed its received_at before a
-- concurrent, later one committed must retry rather than commit out of order.
CREATE TRIGGER versions_received_at_increases
BEFORE INSERT ON versions
WHEN EXISTS (
    SELECT 1 FROM versions
    WHERE user_id = NEW.user_id AND received_at >= NEW.received_at
)
BEGIN
    SELECT RAISE(ABORT, 'folio: version.received_at must increase');
END;

-- The latest version of each record: what lists, filters and single reads see.
CREATE TABLE records (
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
    UNIQUE (user_id, author, record_id),
    FOREIGN KEY (user_id, version_hash) REFERENCES versions (user_id, hash)
) STRICT;
-- One index per date sort, ending in the tie-breakers, so that a page in
-- either direction is a range of an index.
CREATE INDEX records_by_received_at ON records (user_id, received_at, record_id, author);
CREATE INDEX records_by_created_at ON records (user_id, created_at, record_id, author);
CREATE INDEX records_by_version_received_at
    ON records (user_id, version_received_at, record_id, author);
CREATE INDEX records_by_version_created_at
    ON records (user_id, version_created_at, record_id, author);
-- The commonest filters: one type, or one type and one author, newest first.
CREATE INDEX records_by_type ON records (
    user_id, type_record_id, type_entity, received_at, record_id, author
);
CREATE INDEX records_by_type_author ON records (
    user_id, type_record_id, type_entity, author, received_at, record_id
);

-- The link index of each latest version (see folio_core::query::IndexEntry).
CREATE TABLE link_index (
    record_row INTEGER NOT NULL REFERENCES records (row) ON DELETE CASCADE,
    user_id INTEGER NOT NULL,
    path TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (record_row, path, key)
) STRICT, WITHOUT ROWID;
-- `$['path']=value` and `$['path']=` (and tag sorts, distinct).
CREATE INDEX link_index_by_path ON link_index (user_id, path, key, record_row);
-- A bare value (some link has it), existential dependants, blob references.
CREATE INDEX link_index_by_key ON link_index (user_id, key, record_row);

-- The event log: one row per committed version, in commit order, kept at
-- least 24 hours for `Last-Event-Id` replay.
CREATE TABLE events (
    user_id INTEGER NOT NULL REFERENCES users (id),
    seq INTEGER NOT NULL,
    version_hash TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    -- The `X-Svc-Client-Id` of the request that wrote it: not sent back to that client.
    client_id TEXT,
    PRIMARY KEY (user_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX events_by_received_at ON events (user_id, received_at);

-- Uploaded blobs; the bytes live where the host keeps them (files, R2),
-- addressed by hash.
CREATE TABLE blobs (
    user_id INTEGER NOT NULL REFERENCES users (id),
    hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    uploaded_at INTEGER NOT NULL,
    -- An unlinked blob is collected after this; NULL once a record links it.
    expires_at INTEGER,
    PRIMARY KEY (user_id, hash)
) STRICT, WITHOUT ROWID;

-- Request nonces seen within the timestamp window, per app.
CREATE TABLE nonces (
    app_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    ts INTEGER NOT NULL,
    PRIMARY KEY (app_id, nonce)
) STRICT, WITHOUT ROWID;
CREATE INDEX nonces_by_ts ON nonces (ts);

-- Registered apps' keys, for verifying signatures without reading records.
CREATE TABLE apps (
    user_id INTEGER NOT NULL REFERENCES users (id),
    app_id TEXT NOT NULL,
    public_key TEXT NOT NULL,
    PRIMARY KEY (user_id, app_id)
) STRICT, WITHOUT ROWID;
