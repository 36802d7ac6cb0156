"""What the gate judges and which way is worse: the v_run_metrics columns (METRICS), the older names pipelines may
still pass (ALIASES), and for a FOM the way its units say (fom_direction). The store only selects the values; these
rules are the gate's, and it passes them down."""
from __future__ import annotations

# v_run_metrics columns the gate can judge, and which way is worse.
METRICS = {"time_s": "lower", "mpi_time_avg_s": "lower", "mpi_time_max_s": "lower", "mpi_fraction_avg": "lower",
           "mpi_fraction_slowest": "lower", "user_time_avg_s": "lower", "mpi_sync_time_avg_s": "lower",
           "load_balance": "higher", "communication_efficiency": "higher", "parallel_efficiency": "higher"}
# The names the gate had before the measurement model, for pipelines that still pass them.
ALIASES = {"wall_time": "time_s", "mpi_time_avg": "mpi_time_avg_s"}
LOWER_BETTER_UNITS = {"s", "ms", "us", "ns", "sec", "msec", "usec", "nsec", "seconds"}  # usec: IMB through Ramble


class NotMeasured(LookupError):
    """The judged campaign has successful runs in the selection, but none of them measured the metric (an MPI
    fraction of runs made without MPI wrapping, say): there is nothing to judge on it, which is not an error
    of the selection."""


def canonical_metric(metric: str) -> str:
    """The v_run_metrics column (or fom:NAME) a --metric names."""
    metric = ALIASES.get(metric, metric)
    if metric.startswith("fom:") or metric in METRICS:
        return metric
    raise ValueError(f"unknown metric {metric!r}; choose a v_run_metrics column ({', '.join(METRICS)}), "
                     f"{', '.join(f'{a} (= {c})' for a, c in ALIASES.items())}, or fom:NAME")


def direction(metric: str, fom_units: set | None) -> str:
    """'lower' or 'higher' is better: a column's from METRICS; a FOM's from the units it is stored in (times are
    lower-better, rates per second higher-better). ValueError when the units cannot say."""
    if not metric.startswith("fom:"):
        return METRICS[metric]
    if fom_units and fom_units <= LOWER_BETTER_UNITS:
        return "lower"
    if fom_units and all("/s" in (u or "") for u in fom_units):
        return "higher"
    raise ValueError(f"FOM {metric[4:]!r} has units {sorted(map(str, fom_units or ()))}: cannot tell whether "
                     f"larger is worse")
