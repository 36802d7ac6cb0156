"""commscope: where MPI applications lose time to communication.

The collectors turn workload output and Caliper profiles into records and
store them in PostgreSQL. Importing this package stays light: submodules pull
in their own dependencies."""

__version__ = "0.1.0"
