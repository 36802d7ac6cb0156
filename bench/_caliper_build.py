"""The build the Caliper advisor benches share: the workloads with Caliper ON,
for one stack, in build/<stack>-caliper-bench, and an emptied output folder."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
from commscope.workflow import stacks as mpi_stacks
import suite  # noqa: E402


def caliper_build(stack_name: str, caliper_prefix: str, out: Path):
    """(stack, build dir); exits with a message when Caliper or the stack is missing."""
    if not caliper_prefix:
        sys.exit("bench: error: set --caliper-prefix or COMMSCOPE_CALIPER_PREFIX to a Caliper+Adiak install")
    stack = mpi_stacks.by_name(stack_name)
    if not stack.present():
        sys.exit(f"bench: error: --stack {stack.name} is not installed; run bash ci/setup.sh")
    bdir = suite.build(stack, caliper="ON", build_dir=suite.BUILD / f"{stack.name}-caliper-bench",
                       extra=[f"-DCMAKE_PREFIX_PATH={caliper_prefix}"])
    out.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        f.unlink()
    return stack, bdir
