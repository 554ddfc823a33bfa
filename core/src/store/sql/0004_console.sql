-- The owner's console.
--
-- Signing out of every session: a signed-in session whose sign-in is not
-- after this mark (Unix milliseconds) is no longer honoured. Changing the
-- password moves it too.
ALTER TABLE users ADD COLUMN sessions_after INTEGER NOT NULL DEFAULT 0;

-- The app whose signed request wrote the version (its App record id); NULL
-- for the owner's own writes (the consent page, the console, the CLI) and
-- for versions written before this column existed.
ALTER TABLE versions ADD COLUMN app_id TEXT;
