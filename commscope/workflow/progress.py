"""Progress of a long step: how much is done, the time so far and the time left at the pace so far."""
from __future__ import annotations


def minutes(seconds: float) -> str:
    """Whole minutes from 90 s on, else seconds."""
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def pace(done: int, total: int, spent: float, verb: str = "done") -> str:
    """'K of N done in T; about L left': L is the steps left times the mean time of the steps done."""
    said = f"{done} of {total} {verb} in {minutes(spent)}"
    return said + (f"; about {minutes((total - done) * spent / done)} left" if 0 < done < total else "")


class Progress:
    """Counts N long steps of one kind and, after each, says how many are done, the time so far and the time
    left at the mean pace of the steps done so far."""

    def __init__(self, what: str, n: int, log):
        self.what, self.n, self.log, self.times = what, n, log, []

    def done(self, seconds: float) -> None:
        self.times.append(seconds)
        self.log(f"[setup] {self.what}: {pace(len(self.times), self.n, sum(self.times))}")
