-- Who keeps a copy of each of the user's own records (issue 42): every
-- entity whose server was sent a version of the record and may read the
-- latest. A later version is sent to all of them besides its own
-- recipients, so that the version ending someone's access (unshared, a
-- mention dropped, deleted) reaches them. Written in the same transaction
-- as the version and its notifications. Records written before this
-- migration start with an empty audience: their next version reaches the
-- readers of the version it replaces, as before.
CREATE TABLE audiences (
    user_id INTEGER NOT NULL REFERENCES users (id),
    record_id TEXT NOT NULL,
    entity TEXT NOT NULL,
    PRIMARY KEY (user_id, record_id, entity)
) STRICT, WITHOUT ROWID;
