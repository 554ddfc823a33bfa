-- Generated from folio_core::store::MIGRATIONS (version 9) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- What other servers stored in each user's store by notification (issue 40):
-- the versions and their bytes (the version's JSON as stored), apart for the
-- servers of entities the user knows ('notification') and of strangers
-- ('notification_unknown'). Counted in the commit that stores a received
-- version and checked against the server's quotas before one is stored.
CREATE TABLE received_usage (
    user_id INTEGER NOT NULL REFERENCES users (id),
    source TEXT NOT NULL CHECK (source IN ('notification', 'notification_unknown')),
    versions INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (user_id, source)
) STRICT;

-- What stores already hold, counted once: the versions of records kept as
-- received by notification.
INSERT INTO received_usage (user_id, source, versions, bytes)
SELECT v.user_id, r.source, COUNT(*), SUM(LENGTH(v.record))
FROM versions v
JOIN records r ON r.user_id = v.user_id AND r.author = v.author AND r.record_id = v.record_id
WHERE r.source IN ('notification', 'notification_unknown')
GROUP BY v.user_id, r.source;
