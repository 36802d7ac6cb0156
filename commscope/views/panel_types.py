"""What the panel catalog (panels.py) is made of: a Panel is one query with what it reads and how the report
draws it; a Dashboard is a titled list of panels with its variables. Grafana's JSON (grafana.py) and the static
report (report.py) are both built from these."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Panel:
    title: str
    type: str                 # Grafana panel type: timeseries, barchart, table, xychart, heatmap
    sql: str
    columns: list[str]        # what the panel reads; the tests assert them
    unit: str = ""
    description: str = ""
    # How the static report draws it: line (time, metric, value), xy (x, y per series),
    # bar (x, y per series), table, heatmap (x, y, z).
    plot: dict = field(default_factory=dict)
    # Panels of one dashboard that draw different measures of the same rows share one query (Grafana's Dashboard
    # datasource): the first is the source, and the others name it here and send no query of their own. Their sql
    # is the source's. Each shows its `columns` of the long rows (time, metric, measures), without the rows where
    # its first measure is NULL (not measured), split into one series per metric (grafana.py).
    reuses: str = ""
    long: bool = False        # a time series whose query returns long rows as a table (the shared ones)

    @property
    def format(self) -> str:
        """The query format Grafana asks for: time series only for time series panels, except long ones."""
        return "time_series" if self.type == "timeseries" and not self.long else "table"

    @property
    def measures(self) -> list[str]:
        """The panel's value columns, as its plot names them."""
        y = self.plot.get("y")
        return y if isinstance(y, list) else [y] if y else []


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    panels: list[Panel]
    extra_variables: list[dict] = field(default_factory=list)   # {"name", "label", "query"}: single-valued
    annotations: bool = False
    time_from: str = "now-30d"

    def panel(self, title: str) -> Panel:
        """The dashboard's panel of that title (titles are unique within a dashboard)."""
        found = [p for p in self.panels if p.title == title]
        if len(found) != 1:
            raise KeyError(f"{self.uid}: {len(found)} panels titled {title!r}")
        return found[0]
