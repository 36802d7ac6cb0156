-- The environment with the MPI stack, its build and the Caliper configuration taken out. Interconnect
-- configurations are named per stack in the site's interconnects.yaml (openmpi4/tcp, impi2021/tcp): the stack's
-- prefix goes too, so both stacks' tcp runs stay comparable.
CREATE FUNCTION environment_but_stack(environment jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
SELECT (environment - ARRAY['stack', 'mpi_library', 'spack_hash', 'compiler', 'caliper'])
       || jsonb_build_object('interconnect', regexp_replace(environment->>'interconnect', '^[^/]*/', ''))
$$;
