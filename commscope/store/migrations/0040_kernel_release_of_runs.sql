-- The kernel a run ran on is one of its versions (docs/measurement-model.md): runs.kernel holds the release the
-- node reported (`uname -r`, recorded by `commscope run`'s experiment script, or given to ingest as --kernel),
-- NULL where nothing recorded it. v_run_versions lists it, v_version_changes names its changes like the others'
-- ("kernel 6.1.0-18-amd64 -> 6.1.0-21-amd64"), and so the gate's findings and v_change_points do.
ALTER TABLE runs ADD COLUMN kernel text;
