#!/bin/bash
#SBATCH --job-name={workspace_name}/{experiment_namespace}
#SBATCH --nodes={n_nodes}
#SBATCH --ntasks={n_ranks}
#SBATCH --time={slurm_time_limit}
#SBATCH --output={experiment_run_dir}/slurm-%j.log
{slurm_extra}

# Rendered by Ramble from sites/slurm-emulated/slurm_experiment.tpl; execute_experiment holds
# the srun line and writes the workload's output to {log_file}. Ramble expands every name in
# braces: the shell code here uses none.
echo "$SLURM_JOB_ID" > {experiment_run_dir}/slurm-job-id
# A placement (README.md): `SLURM_HOSTFILE=FILE SBATCH_DISTRIBUTION=arbitrary commscope run ...`
# makes sbatch allocate the nodes FILE names and srun start world rank r on its line r. The file
# is kept beside the output.
if [ "$SLURM_DISTRIBUTION" = arbitrary ] && [ -n "$SLURM_HOSTFILE" ]; then
  cp "$SLURM_HOSTFILE" {experiment_run_dir}/slurm.hostfile
fi

# Each node of the job, by the host name it reports, with its cable's kernel counters (eth0
# tx_bytes rx_bytes) before and after the experiment: one task per node, whatever the placement.
# They include Slurm's own messages (these steps, slurmd to slurmctld): a few kilobytes per step.
env -u SLURM_HOSTFILE -u SLURM_DISTRIBUTION -u SLURM_ARBITRARY_NODELIST srun -N {n_nodes} -n {n_nodes} --ntasks-per-node=1 /bin/sh -c 'echo $(hostname) $(cat /sys/class/net/eth0/statistics/tx_bytes) $(cat /sys/class/net/eth0/statistics/rx_bytes)' | sort > {experiment_run_dir}/node-counters.before
bash {execute_experiment}
env -u SLURM_HOSTFILE -u SLURM_DISTRIBUTION -u SLURM_ARBITRARY_NODELIST srun -N {n_nodes} -n {n_nodes} --ntasks-per-node=1 /bin/sh -c 'echo $(hostname) $(cat /sys/class/net/eth0/statistics/tx_bytes) $(cat /sys/class/net/eth0/statistics/rx_bytes)' | sort > {experiment_run_dir}/node-counters.after
