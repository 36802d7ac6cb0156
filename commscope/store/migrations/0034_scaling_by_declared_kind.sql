-- Scaling by the declared kind of each parameter (issue 33). Which parameters a rank count holds is the
-- application's to say: `commscope ingest --per-rank s` (LULESH's -s is the mesh per rank) or `--global n`
-- store the names among the series' parameters as scaling.per_rank and scaling.global (sorted arrays).
-- commscope's own workloads declare their global sizes by name (param.n, param.global, global_size).
--
-- v_scaling pairs each experiment (application, environment, the parameters but the rank count and the
-- declared ones) with its smallest rank count, on the same window, by kind:
--   weak    the per-rank parameters are equal: efficiency = base time / time, speedup NULL;
--   strong  the global parameters are equal and the per-rank ones are not (or none is declared):
--           speedup = base time / time, efficiency = speedup / (ranks / base ranks);
--   NULL    nothing declared: the pair is listed with its times, but neither speedup nor efficiency,
--           since whether the problem grew with the ranks is unknown.
-- A pair whose per-rank parameters are equal (its problem grew with the ranks) is never strong.
--
-- The Scaling dashboard's panels (views/panels.py) read the same declarations through v_scaling_declared.
-- The keys of 0013 change only for parameters that carry declarations, which no series had before.

CREATE FUNCTION scaling_declared(parameters jsonb, kind text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
SELECT ARRAY(
    SELECT DISTINCT k FROM (
        SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(parameters->('scaling.' || kind)) = 'array'
                                              THEN parameters->('scaling.' || kind) ELSE '[]' END) AS k
        UNION ALL
        SELECT k FROM unnest(ARRAY['param.n', 'param.global', 'global_size']) AS k
        WHERE kind = 'global' AND parameters ? k) d
    ORDER BY k)
$$;

-- The declared parameters' values, as one jsonb object ({} when none is declared).
CREATE FUNCTION scaling_values(parameters jsonb, keys text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
SELECT coalesce(jsonb_object_agg(k, parameters->k), '{}'::jsonb) FROM unnest(keys) AS k
$$;

-- The declared parameters' values as a label: "s=8", "n=100,100,100 nz=4" (NULL when none is declared).
CREATE FUNCTION scaling_label(parameters jsonb, keys text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT nullif(string_agg(k || '=' || coalesce(parameters->>k, ''), ' ' ORDER BY k), '') FROM unnest(keys) AS k
$$;

-- The experiment without its rank count and without its declared parameters.
CREATE FUNCTION scaling_experiment_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid']
                                  - scaling_declared(parameters, 'per_rank') - scaling_declared(parameters, 'global'),
                             environment)::text)
$$;

-- 0013's keys, for the panels: strong scaling sets the declared per-rank parameters aside too (they shrink as
-- ranks grow), weak scaling the declared global ones (they grow).
CREATE OR REPLACE FUNCTION strong_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid']
                                  - ARRAY(SELECT jsonb_array_elements_text(
                                        CASE WHEN jsonb_typeof(parameters->'scaling.per_rank') = 'array'
                                             THEN parameters->'scaling.per_rank' ELSE '[]' END)),
                             environment)::text)
$$;

CREATE OR REPLACE FUNCTION weak_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid',
                                                     'param.n', 'param.global', 'global_size']
                                  - ARRAY(SELECT jsonb_array_elements_text(
                                        CASE WHEN jsonb_typeof(parameters->'scaling.global') = 'array'
                                             THEN parameters->'scaling.global' ELSE '[]' END)),
                             environment)::text)
$$;
-- The few series that declare kinds, found without reading every series' parameters (the panels join this view).
CREATE INDEX series_declaring_scaling ON series (id) WHERE parameters ?| ARRAY['scaling.per_rank', 'scaling.global'];
