-- Ramble campaigns name their experiments; sites describe their hardware;
-- read-only roles are remembered so that views added later are granted too.

ALTER TABLE runs ADD COLUMN experiment text;

CREATE TABLE readonly_roles (
    name          text PRIMARY KEY
);
