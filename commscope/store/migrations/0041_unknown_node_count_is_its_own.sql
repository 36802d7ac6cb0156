-- Which runs are one experiment (docs/measurement-model.md, "Run, series, environment"): one series, whose key
-- holds the node count with the other parameters. A node count nothing recorded (a profile without Adiak's
-- numhosts, a workload output alone) is NULL, a value of its own: such runs are never one experiment with runs
-- whose node count is known, even 1. The gate judges each series against its own history; the scaling view and
-- panels draw one point per series and pair series that differ only in their rank count, their node count and
-- their declared sizes.
--
-- The scaling keys of 0013 and 0034 set the node count aside whatever it was, so a series of unknown node count
-- and one on 1 node had one key, and the scaling view pooled their runs into one point. Now they set aside a
-- known node count only; an unknown one stays in the key (as null), so such series pair only with each other.
-- The series key does not change; run_metrics_daily's stored keys are computed again.

-- The parameters less the rank count and what follows from it (Ramble's n_ranks and n_nodes, the process grid)
-- and less the node count where it is known.
CREATE FUNCTION scale_free_parameters(parameters jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
SELECT (parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid'])
       || CASE WHEN jsonb_typeof(parameters->'nodes') = 'number' THEN '{}'::jsonb ELSE '{"nodes": null}'::jsonb END
$$;

CREATE OR REPLACE FUNCTION scaling_experiment_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, scale_free_parameters(parameters)
                                  - scaling_declared(parameters, 'per_rank') - scaling_declared(parameters, 'global'),
                             environment)::text)
$$;

CREATE OR REPLACE FUNCTION strong_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, scale_free_parameters(parameters)
                                  - ARRAY(SELECT jsonb_array_elements_text(
                                        CASE WHEN jsonb_typeof(parameters->'scaling.per_rank') = 'array'
                                             THEN parameters->'scaling.per_rank' ELSE '[]' END)),
                             environment)::text)
$$;

CREATE OR REPLACE FUNCTION weak_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, scale_free_parameters(parameters) - ARRAY['param.n', 'param.global', 'global_size']
                                  - ARRAY(SELECT jsonb_array_elements_text(
                                        CASE WHEN jsonb_typeof(parameters->'scaling.global') = 'array'
                                             THEN parameters->'scaling.global' ELSE '[]' END)),
                             environment)::text)
$$;

-- Each (day, series, window) row's keys are its series' (one series has one key).
UPDATE run_metrics_daily d
SET strong_key = strong_scaling_key(s.app, s.parameters, s.environment),
    weak_key = weak_scaling_key(s.app, s.parameters, s.environment)
FROM series s
WHERE s.id = d.series_id
  AND (d.strong_key, d.weak_key) IS DISTINCT FROM (strong_scaling_key(s.app, s.parameters, s.environment),
                                                  weak_scaling_key(s.app, s.parameters, s.environment));
