-- Generated from folio_core::store::MIGRATIONS (version 2) for D1; do not edit.
-- Regenerate: FOLIO_WRITE_MIGRATIONS=1 cargo test -p folio-core --test d1_migrations

-- Apps created on the server itself (`folio app add --full-access`) may act
-- on every record type; registered apps act within their authorization's grant.
ALTER TABLE apps ADD COLUMN full_access INTEGER NOT NULL DEFAULT 0 CHECK (full_access IN (0, 1));
