"""ReFrame site configuration for one machine: the system `local`, whose partition `mpirun` runs jobs on this
host (the `local` scheduler) through Debian's Open MPI 4.1 launcher, and the programming environment
`debian-openmpi4` that compiles with Debian's Open MPI wrapper. It mirrors the `debian-openmpi4` stack of
commscope/workflow/stacks.py: the stack's own wrapper and launcher by full name, never whatever `mpicc`/`mpirun` comes first
on PATH.

    reframe -C reframe/config/local.py -c reframe/checks/pingpong.py -r

Performance logs go to ReFrame's default file handler (`filelog`, one `|`-separated file per test under
<perflogdir>/local/mpirun/, with a header line), which commscope ingest reads (commscope/README.md, ReFrame)."""
from reframe.core.backends import register_launcher
from reframe.core.launchers.mpi import MpirunLauncher


@register_launcher('mpirun.openmpi')
class DebianOpenMPILauncher(MpirunLauncher):
    """ReFrame's `mpirun` launcher, calling Debian Open MPI's own mpirun. --oversubscribe: the tests may ask
    for more ranks than this machine has cores (2 here)."""

    def command(self, job):
        return ['mpirun.openmpi', '--oversubscribe', '-np', str(job.num_tasks)]


site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'this machine, Debian Open MPI 4.1 through mpirun',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    'name': 'mpirun',
                    'descr': 'jobs on this host, launched with mpirun.openmpi',
                    'scheduler': 'local',
                    'launcher': 'mpirun.openmpi',
                    'environs': ['debian-openmpi4'],
                    # Open MPI refuses to run as root without these; harmless for other users.
                    'env_vars': [['OMPI_ALLOW_RUN_AS_ROOT', '1'],
                                 ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1']],
                    # one job at a time: the machine is small and the latency of a busy core is not the network's
                    'max_jobs': 1,
                }
            ]
        }
    ],
    'environments': [
        {
            'name': 'debian-openmpi4',
            'cc': '/usr/bin/mpicc.openmpi',
            'cxx': '/usr/bin/mpicxx.openmpi',
            'ftn': '',
            'target_systems': ['local'],
        }
    ],
}
