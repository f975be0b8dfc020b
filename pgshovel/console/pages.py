"""The console's HTML: Jinja2 templates of the package filled with what ``reading`` returns.

Pages are rendered whole on the server and refresh themselves with a
``<meta http-equiv="refresh">``: no script, no style sheet or font fetched.
The set page's lag and throughput charts are inline SVG
(``pgshovel.console.charts``) drawn from the one-hour history each relay and
worker keeps in its status document: lag per process, events/s of the relays,
mutations/s of the copies. Every value is escaped (autoescape). Pure: the
data and the refresh interval in, a string out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup

from pgshovel.console.charts import Series, line_chart

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("pgshovel.console", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _number(value: Any) -> float | None:
    """A finite number, or None for anything else (a field a status does not carry)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def seconds(value: Any) -> str:
    """``0.4 s``, ``12 s``, ``3.5 min``, ``2.1 h``; ``-`` when unknown."""
    number = _number(value)
    if number is None:
        return "-"
    if number < 10:
        return f"{number:.1f} s"
    if number < 120:
        return f"{number:.0f} s"
    if number < 7200:
        return f"{number / 60:.1f} min"
    return f"{number / 3600:.1f} h"


def rate(value: Any) -> str:
    """A rate per second: ``0``, ``0.25``, ``12.3``, ``4567``; ``-`` when unknown."""
    number = _number(value)
    if number is None:
        return "-"
    if number == 0:
        return "0"
    if number < 1:
        return f"{number:.2f}"
    if number < 100:
        return f"{number:.1f}"
    return f"{number:.0f}"


def ago(value: Any, now: float) -> str:
    """``3 s ago`` for an epoch time; ``-`` when unknown."""
    number = _number(value)
    if number is None:
        return "-"
    return f"{seconds(max(0.0, now - number))} ago"


def clock(value: Any) -> str:
    """The local time of day of an epoch time, with the zone."""
    number = _number(value)
    if number is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(number))


def samples(document: Mapping[str, Any]) -> list[tuple[float, float, float]]:
    """The ``[time, lag, rate]`` samples of a status document (malformed ones left out)."""
    history = document.get("history")
    rows = history.get("samples", ()) if isinstance(history, Mapping) else ()
    found = []
    for row in rows:
        if isinstance(row, (list, tuple)) and len(row) >= 3:
            when, lag, per_second = (_number(item) for item in row[:3])
            if when is not None and lag is not None and per_second is not None:
                found.append((when, lag, per_second))
    return found


def last_rate(document: Mapping[str, Any]) -> float | None:
    """The rate of a process's latest sample (its last ten seconds or so)."""
    found = samples(document)
    return found[-1][2] if found else None


def percent(task: Mapping[str, Any]) -> int:
    """How far a snapshot task is: rows done of the estimate, 0-100."""
    done, estimate = _number(task.get("rows")), _number(task.get("estimate"))
    if done is None or not estimate:
        return 0
    return max(0, min(100, round(100 * done / estimate)))


def _short(name: str) -> str:
    """``pid 1234`` out of a process name ``host:pid:id``."""
    parts = name.split(":")
    return f"pid {parts[-2]}" if len(parts) >= 3 else name


def charts(detail: Mapping[str, Any]) -> list[Markup]:
    """The set page's two charts: lag of every process, and throughput."""
    relays = [
        (f"relay ({_short(str(item.get('name', '')))})", samples(item))
        for item in detail["relay"]["processes"]
    ]
    workers = [
        (f"{item.get('target', 'copy')} ({_short(str(item.get('name', '')))})", samples(item))
        for item in detail["copies"]
    ]
    end = float(detail["now"])
    lag = [Series(label, [(t, v) for t, v, _ in points]) for label, points in relays + workers]
    throughput = [
        Series(f"{label} events/s", [(t, r) for t, _, r in points]) for label, points in relays
    ] + [
        Series(f"{label} mutations/s", [(t, r) for t, _, r in points]) for label, points in workers
    ]
    return [
        Markup(line_chart(lag, title="Lag, last hour", unit="seconds", end=end)),  # noqa: S704
        Markup(  # noqa: S704 (line_chart escapes every text it draws)
            line_chart(throughput, title="Throughput, last hour", unit="per second", end=end)
        ),
    ]


def summary(detail: Mapping[str, Any]) -> dict[str, float | None]:
    """The set page's tiles: the leader's lag and rate, the copies' total rate and largest lag."""
    leader = next(
        (item for item in detail["relay"]["processes"] if item.get("role") == "leader"), None
    )
    copy_rates = [last_rate(item) for item in detail["copies"]]
    copy_lags = [_number(item.get("lag_seconds")) for item in detail["copies"]]
    known_rates = [value for value in copy_rates if value is not None]
    known_lags = [value for value in copy_lags if value is not None]
    return {
        "relay_lag": None if leader is None else _number(leader.get("lag_seconds")),
        "relay_rate": None if leader is None else last_rate(leader),
        "copy_rate": sum(known_rates) if known_rates else None,
        "copy_lag": max(known_lags) if known_lags else None,
    }


_ENVIRONMENT.filters.update(
    seconds=seconds, rate=rate, ago=ago, clock=clock, last_rate=last_rate, percent=percent
)


def overview_page(data: Mapping[str, Any], refresh: int) -> str:
    return _ENVIRONMENT.get_template("overview.html").render(**data, refresh=refresh)


def set_page(detail: Mapping[str, Any], refresh: int) -> str:
    return _ENVIRONMENT.get_template("set.html").render(
        **detail, refresh=refresh, charts=charts(detail), summary=summary(detail)
    )


def error_page(title: str, message: str, refresh: int, now: float) -> str:
    return _ENVIRONMENT.get_template("error.html").render(
        title=title, message=message, refresh=refresh, now=now, status=title
    )
