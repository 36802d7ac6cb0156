-- A series is one experiment on one system, whatever versions it ran on (docs/measurement-model.md,
-- commscope/read/identity.py): its key is the application, the parameters, and the environment's system, stack as
-- the site names it, interconnect selection and Caliper configuration. The MPI library's version string, compiler,
-- Spack spec hash, Caliper version and hardware description are the runs' own (runs.stack_id's library,
-- runs.compiler, runs.spack_hash, runs.caliper_version, runs.hardware_id): v_run_versions lists them and
-- v_version_changes says where along a series each changed.
--
-- Existing series are re-keyed: those that differ only in versions merge into the lowest id, every run kept, the
-- rollups moved by the runs' update triggers, change points and detectable effects moved to the merged series
-- (its change points recomputed by the next `commscope changepoints` or ingest: its state is forgotten).

-- The family of an MPI library's version string: identity.mpi_family, the same rule.
CREATE FUNCTION mpi_family(library text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN strpos(lower(library), 'open mpi') > 0 THEN 'Open MPI'
    WHEN strpos(lower(library), 'mvapich') > 0 THEN 'MVAPICH'
    WHEN strpos(lower(library), 'intel(r) mpi') > 0 OR strpos(lower(library), 'intel mpi') > 0 THEN 'Intel MPI'
    WHEN strpos(lower(library), 'cray mpich') > 0 THEN 'Cray MPICH'
    WHEN strpos(lower(library), 'mpich') > 0 THEN 'MPICH'
    ELSE coalesce(nullif(btrim(regexp_replace(regexp_replace(library, '[^ \t\n\r\f\v]*[0-9][^ \t\n\r\f\v]*', '', 'g'),
                                              '[ \t\n\r\f\v]+', ' ', 'g'), ' ,:;'), ''), library)
END
$$;

-- The key the store interns a series by: SHA-256 of [app, parameters, environment] as canonical jsonb text.
CREATE FUNCTION series_key(app text, parameters jsonb, environment jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT encode(sha256(convert_to(jsonb_build_array(app, parameters, environment)::text, 'UTF8')), 'hex')
$$;

-- Each series' identity. A stack that a library string named (a direct ingest: the stack is the start of the
-- library string the series recorded) becomes that library's family.
CREATE TEMPORARY TABLE series_identity ON COMMIT DROP AS
SELECT s.id, s.app, s.parameters, s.environment->>'stack' AS old_stack,
       (left(s.environment->>'mpi_library', length(s.environment->>'stack')) = s.environment->>'stack'
        AND s.environment->>'stack' NOT IN ('unknown', 'mpi-not-recorded')) AS stack_from_library,
       (s.environment - ARRAY['mpi_library', 'compiler', 'spack_hash', 'hardware']) AS environment
FROM series s;
UPDATE series_identity SET environment = environment || jsonb_build_object('stack', mpi_family(old_stack))
WHERE stack_from_library;

CREATE TEMPORARY TABLE series_merge ON COMMIT DROP AS
SELECT id, min(id) OVER (PARTITION BY app, parameters, environment) AS survivor, stack_from_library, old_stack,
       environment
FROM series_identity;
CREATE INDEX ON series_merge (id);

-- The merged series' identity first: the runs' update below rebuilds every rollup from it (the scaling keys
-- hash the environment), so every run is updated, merged or not.
UPDATE series s SET environment = m.environment, key = series_key(s.app, s.parameters, m.environment)
FROM series_merge m WHERE s.id = m.id AND m.survivor = m.id;

-- Runs: into the merged series, and a library-named stack under its family's name (the library string kept).
INSERT INTO stacks (name, library)
SELECT DISTINCT mpi_family(st.name), st.library
FROM runs r JOIN series_merge m ON m.id = r.series_id JOIN stacks st ON st.id = r.stack_id
WHERE m.stack_from_library AND st.name = m.old_stack
ON CONFLICT (name, library) DO NOTHING;

UPDATE runs r SET series_id = m.survivor,
       stack_id = coalesce((SELECT f.id FROM stacks st JOIN stacks f ON f.name = mpi_family(st.name)
                                                                 AND f.library IS NOT DISTINCT FROM st.library
                            WHERE st.id = r.stack_id AND m.stack_from_library AND st.name = m.old_stack),
                           r.stack_id)
FROM series_merge m
WHERE m.id = r.series_id;

UPDATE annotations a SET stack = mpi_family(a.stack)
WHERE a.stack IN (SELECT old_stack FROM series_merge WHERE stack_from_library);

-- The gate's detectable effects: the newest judged of the merged series' rows per metric and window.
DELETE FROM gate_detectable g USING series_merge m
WHERE g.series_id = m.id AND EXISTS (
    SELECT 1 FROM gate_detectable o JOIN series_merge mo ON mo.id = o.series_id
    WHERE mo.survivor = m.survivor AND o.metric = g.metric AND o."window" = g."window"
      AND (o.campaign_id, o.checked_at, o.series_id) > (g.campaign_id, g.checked_at, g.series_id));
UPDATE gate_detectable g SET series_id = m.survivor FROM series_merge m WHERE g.series_id = m.id AND m.survivor <> m.id;

-- Change points: kept (with when they were first found) on the merged series; its state forgotten, so the next
-- recompute reads its whole history.
UPDATE change_points c SET series_id = m.survivor FROM series_merge m WHERE c.series_id = m.id AND m.survivor <> m.id;
DELETE FROM change_point_state c USING series_merge m
WHERE c.series_id = m.id AND m.survivor IN (SELECT survivor FROM series_merge WHERE survivor <> id);

DELETE FROM series s USING series_merge m WHERE s.id = m.id AND m.survivor <> m.id;

-- A level accepted after an intended change (commscope accept): from its campaign on, the gate's baseline for the
-- series starts there. Shown as an annotation (tag accepted-level).
CREATE TABLE accepted_levels (
    series_id     integer NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    campaign_id   bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    reason        text NOT NULL,
    accepted_by   text NOT NULL DEFAULT current_user,
    accepted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (series_id, campaign_id)
);
