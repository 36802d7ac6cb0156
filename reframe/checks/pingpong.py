"""commscope's pingpong workload (workloads/pingpong) as a ReFrame performance test: transport latency between two
ranks, one test case per message size. Every `FOM <name> <value> <unit>` line the workload prints
(workloads/README.md, output contract) becomes a performance variable of that name and unit, so the report and the
perflog carry exactly what the workload measured. The sanity check is the workload's own VERIFY line.

    reframe -C reframe/config/local.py -c reframe/checks/pingpong.py -r --report-file report.json

`-S max_latency_us=X` sets a latency ceiling (ReFrame reference X us, no lower bound, upper threshold 0): cases
slower than X fail their performance check, as a site's regression check would."""
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, parameter, performance_function, run_after, run_before, sanity_function, variable

WORKLOADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'workloads')
FOM_LINE = r'^FOM (\S+) (\S+) (\S+)$'


class BuildPingpong(rfm.CompileOnlyRegressionTest):
    """The workloads' CMake project, pingpong target only, without Caliper (ReFrame measures here, not Caliper),
    with the programming environment's MPI wrapper: built once per environment and shared by every case."""

    build_system = 'CMake'
    sourcesdir = WORKLOADS

    @run_before('compile')
    def configure(self):
        self.build_system.builddir = 'build'
        self.build_system.config_opts = ['-DCOMMSCOPE_WITH_CALIPER=OFF',
                                         f'-DMPI_C_COMPILER={self.current_environ.cc}']
        self.build_system.build_opts = ['pingpong']
        self.build_system.max_concurrency = 2

    @sanity_function
    def built(self):
        return sn.assert_true(os.path.isfile(os.path.join(self.stagedir, 'build', 'pingpong')))


@rfm.simple_test
class PingPong(rfm.RunOnlyRegressionTest):
    """Half round-trip latency between 2 ranks at two message sizes (8 B: the transport's latency; 64 KiB: past
    Open MPI's eager limit, so the rendezvous protocol)."""

    valid_systems = ['*']
    valid_prog_environs = ['*']
    message_bytes = parameter([8, 65536])
    num_tasks = 2
    iters = variable(int, value=500)       # round trips per batch
    batches = variable(int, value=5)
    max_latency_us = variable(float, type(None), value=None)
    binaries = fixture(BuildPingpong, scope='environment')
    time_limit = '2m'
    tags = {'commscope', 'mpi'}

    @run_after('setup')
    def set_executable(self):
        self.executable = os.path.join(self.binaries.stagedir, 'build', 'pingpong')
        self.executable_opts = ['--bytes', str(self.message_bytes), '--iters', str(self.iters),
                                '--batches', str(self.batches), '--warmup', '50']

    @run_after('setup')
    def set_ceiling(self):
        if self.max_latency_us is not None:
            self.reference = {'*': {'latency': (self.max_latency_us, None, 0, 'us')}}

    @sanity_function
    def verified(self):
        return sn.all([sn.assert_found(r'^VERIFY payload PASS', self.stdout),
                       sn.assert_eq(sn.extractsingle(r'^RANKS (\d+)', self.stdout, 1, int), self.num_tasks)])

    @run_before('performance')
    def fom_lines_as_performance_variables(self):
        """One performance variable per FOM line, in the workload's order."""
        with open(os.path.join(self.stagedir, str(sn.evaluate(self.stdout)))) as f:
            foms = re.findall(FOM_LINE, f.read(), re.M)
        self.perf_variables = {
            name: sn.make_performance_function(
                sn.extractsingle(rf'^FOM {re.escape(name)} (\S+) ', self.stdout, 1, float), unit)
            for name, _value, unit in foms}
