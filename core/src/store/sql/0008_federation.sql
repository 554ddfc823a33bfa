-- Federation (docs/federation.md): each user's server key, and the outbox of
-- notifications to other entities' servers.

-- The Ed25519 key a user's server signs its requests to other servers with,
-- published in the user's Entity record (`signing_keys`).
CREATE TABLE server_keys (
    user_id INTEGER PRIMARY KEY REFERENCES users (id),
    -- The 32-byte seed, standard base64. Never served.
    seed TEXT NOT NULL,
    -- The public key, standard base64, as the Entity record lists it.
    public_key TEXT NOT NULL
);

-- One notification to send: a version of a record the user authored, for
-- one entity it concerns. Written in the same transaction as the version.
-- A delivered row is deleted; one that failed for good keeps `failed_at`.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    -- The entity to notify.
    recipient TEXT NOT NULL,
    record_id TEXT NOT NULL,
    version_hash TEXT NOT NULL,
    -- Unix milliseconds: when the version was written, and when the next
    -- attempt is due.
    queued_at INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    -- Unix milliseconds, once delivery was given up.
    failed_at INTEGER
);
CREATE UNIQUE INDEX outbox_once ON outbox (user_id, recipient, version_hash);
CREATE INDEX outbox_due ON outbox (due_at) WHERE failed_at IS NULL;
