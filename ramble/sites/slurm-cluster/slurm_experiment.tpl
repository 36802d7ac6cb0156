#!/bin/bash
#SBATCH --job-name={workspace_name}/{experiment_namespace}
#SBATCH --nodes={n_nodes}
#SBATCH --ntasks={n_ranks}
#SBATCH --time={slurm_time_limit}
#SBATCH --output={experiment_run_dir}/slurm-%j.log
{slurm_extra}

# Rendered by Ramble from sites/<site>/slurm_experiment.tpl; execute_experiment holds
# the srun line and writes the workload's output to {log_file}.
echo "$SLURM_JOB_ID" > {experiment_run_dir}/slurm-job-id
bash {execute_experiment}
