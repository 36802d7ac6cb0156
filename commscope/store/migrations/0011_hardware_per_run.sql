-- A system's hardware description is versioned per run. Before, ingesting with
-- a new description (a new node type) overwrote the system's row, so every past
-- run of that system showed the new hardware. Now each distinct description of
-- a system is a row of hardware_versions, a run points at the one it was
-- ingested with, and v_runs reads the run's own.

CREATE TABLE hardware_versions (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id     integer NOT NULL REFERENCES systems (id) ON DELETE CASCADE,
    digest        text NOT NULL,               -- md5 of the description's canonical JSON
    cpu_model     text,
    cores_per_node integer,
    interconnect  text,
    hardware      jsonb NOT NULL,
    first_seen    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (system_id, digest)
);

ALTER TABLE runs ADD COLUMN hardware_id integer REFERENCES hardware_versions (id);

-- What the stores before this migration knew: each system's one (latest) description, for its runs.
INSERT INTO hardware_versions (system_id, digest, cpu_model, cores_per_node, interconnect, hardware)
SELECT id, md5(hardware::text), cpu_model, cores_per_node, interconnect, hardware
FROM systems WHERE hardware <> '{}' OR cpu_model IS NOT NULL OR cores_per_node IS NOT NULL OR interconnect IS NOT NULL;
UPDATE runs r SET hardware_id = h.id FROM hardware_versions h WHERE h.system_id = r.system_id;
