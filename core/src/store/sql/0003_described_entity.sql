-- The versions whose content names an entity (Entity records, in practice),
-- by that entity: what makes an entity known (a write's entity links),
-- `include_links=entity` and discovery look Entity records up by. Before
-- it, each lookup read every Entity record of the store. Only versions that
-- name an entity are in it.
CREATE INDEX versions_by_described_entity
    ON versions (user_id, json_extract(record, '$.content.entity'))
    WHERE json_extract(record, '$.content.entity') IS NOT NULL;
