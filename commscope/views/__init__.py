"""Stage 3, views -> panels: the panel catalog over the store's views (panels), the Grafana dashboards built
from it (grafana), the static HTML report (report) with its reference-studies section (reference), and the
store's runs back as a Thicket for notebooks (thicket)."""
