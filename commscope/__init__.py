"""commscope: where MPI applications lose time to communication.

The collectors turn workload output and Caliper profiles into records and
store them in PostgreSQL. Importing this package stays light: submodules pull
in their own dependencies."""

__version__ = "0.1.0"

__all__ = ["load_thicket", "load_graphframe", "select_runs"]


def __getattr__(name):
    # Thicket, Hatchet and pandas load only when a notebook asks for them.
    if name in __all__:
        from commscope.views import thicket as ensemble
        return getattr(ensemble, name)
    raise AttributeError(f"module 'commscope' has no attribute {name!r}")
