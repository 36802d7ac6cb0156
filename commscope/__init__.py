"""commscope: where MPI applications lose time to communication.

One subpackage per stage: read turns workload output and Caliper profiles
into records, store writes them to PostgreSQL, gate finds regressions, advise
suggests changes, views shows the results, and workflow runs the studies.
Importing this package stays light: submodules pull in their own
dependencies."""

__version__ = "0.1.0"

__all__ = ["load_thicket", "load_graphframe", "select_runs"]


def __getattr__(name):
    # Thicket, Hatchet and pandas load only when a notebook asks for them.
    if name in __all__:
        from commscope.views import thicket
        return getattr(thicket, name)
    raise AttributeError(f"module 'commscope' has no attribute {name!r}")
