-- Apps created on the server itself (`folio app add --full-access`) may act
-- on every record type; registered apps act within their authorization's grant.
ALTER TABLE apps ADD COLUMN full_access INTEGER NOT NULL DEFAULT 0 CHECK (full_access IN (0, 1));
