#!/bin/bash
# commscope's execute_experiment template (ramble/execute_experiment.tpl), copied into every
# workspace by `commscope run`. Ramble expands the names in braces.
cd "{experiment_run_dir}"
# The kernel this runs on, a version of the experiment's runs (commscope/read/ramble.py reads it).
uname -r > "{experiment_run_dir}/kernel-release"

{command}

status=$?
echo "$status" > "{experiment_run_dir}/exit-status"
# `ramble on` stops at the first script that fails, but `ramble workspace analyze` judges every
# experiment from its output (every VERIFY PASS, the right world size), so a failed run is
# recorded here and the others still run.
exit 0
