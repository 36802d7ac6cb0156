r"""What Grafana does to a panel's SQL before PostgreSQL sees it, so that the report, the tests and the benchmark
run the very text Grafana would send.

1. The frontend replaces template variables (public/app/features/plugins/sql: interpolateVariable): a multi-value
   or include-all variable becomes quoted literals joined by ',' ('a','b'; "All" without a custom all value is every
   option), a single value is inserted with ' doubled.
2. The backend's sqleng.Interpolate replaces $__interval_ms, $__interval (gtime.FormatInterval),
   $__unixEpochFrom(), $__unixEpochTo().
3. The postgres macro engine (pkg/tsdb/grafana-postgresql-datasource/macros.go) expands $__name(args) with the
   regex \$([_a-zA-Z0-9]+)\(([^\)]*)\).
"""
from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal


def quote_literal(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def interpolate_variables(sql: str, values: dict[str, list[str] | str], multi: set[str]) -> str:
    def repl(m):
        name = m.group(1)
        if name not in values:
            return m.group(0)   # Grafana's own $__ macros and unknown names stay
        v = values[name]
        if isinstance(v, list):
            return ",".join(quote_literal(x) for x in v)
        return quote_literal(v) if name in multi else str(v).replace("'", "''")
    return re.sub(r"\$(\w+)", repl, sql)


def rfc3339nano(t: dt.datetime) -> str:
    """Go's time.RFC3339Nano of a UTC time: fractional seconds without trailing zeros."""
    t = t.astimezone(dt.timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += ("." + f"{t.microsecond:06d}").rstrip("0")
    return s + "Z"


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_interval(text: str) -> float:
    """gtime.ParseInterval for the units the dashboards use: seconds."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|w|y)", text.strip().strip("'"))
    if not m:
        raise ValueError(f"error parsing interval {text}")
    return int(m.group(1)) * _UNITS[m.group(2)]


def format_interval(seconds: float) -> str:
    """gtime.FormatInterval."""
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(1, int(seconds * 1000))}ms" if seconds >= 0.001 else "1ms"


def go_float(v: float) -> str:
    """Go's %v of a float64 (strconv 'g' with shortest digits): exponent form below 1e-4 and
    from 1e6 on, e.g. 86400 -> 86400 but 1209600 -> 1.2096e+06."""
    d = Decimal(repr(float(v))).normalize()
    sign, digits, exp = d.as_tuple()
    e = len(digits) + exp - 1
    if e < -4 or e >= 6:
        mant = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        return ("-" if sign else "") + f"{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return format(d, "f")


# Grafana's interval rounding (rangeutil.roundInterval), in seconds: (upper bound, interval).
_ROUND = [(0.015, 0.01), (0.035, 0.02), (0.075, 0.05), (0.15, 0.1), (0.35, 0.2), (0.75, 0.5), (1.5, 1), (3.5, 2),
          (7.5, 5), (12.5, 10), (17.5, 15), (25, 20), (45, 30), (90, 60), (210, 120), (450, 300), (750, 600),
          (1050, 900), (1500, 1200), (2700, 1800), (5400, 3600), (9000, 7200), (16200, 10800), (32400, 21600),
          (64800, 43200), (129600, 86400), (604800, 604800), (1814400, 2592000)]


def grafana_interval(t_from: dt.datetime, t_to: dt.datetime, min_interval: str = "1d", max_data_points: int = 1000) -> float:
    """The $__interval Grafana computes: the range over the panel's width in points,
    rounded to a tidy step, but never below the panel's minimum interval."""
    raw = (t_to - t_from).total_seconds() / max_data_points
    step = next((iv for bound, iv in _ROUND if raw < bound), 31536000)
    return max(step, parse_interval(min_interval))


def expand_macros(sql: str, t_from: dt.datetime, t_to: dt.datetime) -> str:
    """macros.go: Interpolate and evaluateMacro (non-TimescaleDB)."""
    original = sql
    error = []

    def evaluate(name: str, args: list[str]) -> str:
        if name == "__time":
            return f'{args[0]} AS "time"'
        if name == "__timeEpoch":
            return f'extract(epoch from {args[0]}) as "time"'
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{rfc3339nano(t_from)}' AND '{rfc3339nano(t_to)}'"
        if name == "__timeFrom":
            return f"'{rfc3339nano(t_from)}'"
        if name == "__timeTo":
            return f"'{rfc3339nano(t_to)}'"
        if name == "__timeGroup":
            if len(args) < 2:
                raise ValueError(f"macro {name} needs time column and interval and optional fill value")
            s = go_float(parse_interval(args[1]))
            return f"floor(extract(epoch from {args[0]})/{s})*{s}"
        if name == "__timeGroupAlias":
            return evaluate("__timeGroup", args) + ' AS "time"'
        if name == "__unixEpochFilter":
            return f"{args[0]} >= {int(t_from.timestamp())} AND {args[0]} <= {int(t_to.timestamp())}"
        raise ValueError(f'unknown macro "{name}"')

    def repl(m):
        name, raw = m.group(1), m.group(2)
        if name == "__timeGroup":
            i = original.find(m.group(0))
            if i >= 0 and len(original) > i + len(m.group(0)) and original[i + len(m.group(0))] == ",":
                name = "__timeGroupAlias"
        args = [a.strip(" ") for a in raw.split(",")]
        try:
            return evaluate(name, args)
        except (ValueError, IndexError) as e:
            error.append(e)
            return "macro_error()"

    out = re.sub(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)", repl, sql)
    if error:
        raise ValueError(str(error[0]))
    return out


def expand(sql: str, t_from: dt.datetime, t_to: dt.datetime, values: dict, multi: set[str],
           interval: float | None = None) -> str:
    """The SQL Grafana sends to PostgreSQL for this panel, time range and variable values (MULTI: the names of
    the multi-value variables, quoted even when one value is selected)."""
    sql = interpolate_variables(sql, values, multi)
    iv = grafana_interval(t_from, t_to) if interval is None else interval
    sql = sql.replace("$__interval_ms", str(int(iv * 1000))).replace("$__interval", format_interval(iv))
    sql = sql.replace("$__unixEpochFrom()", str(int(t_from.timestamp()))).replace("$__unixEpochTo()", str(int(t_to.timestamp())))
    return expand_macros(sql, t_from, t_to)
