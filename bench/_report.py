"""Figures, their goals, the Markdown table and the JSON document (pure: no I/O).

A :class:`Figure` holds the raw runs of its variant ("value") and of its
baseline, from which the medians, the ratio and whether each goal is met are
derived. A figure may also hold the runs of a reference both are compared
to (e.g. no capture when the baseline is another capture); its "gap" is its
ratio to that reference minus its baseline's. A figure that could not be
measured keeps a ``note`` saying why and shows it in the table instead of
numbers; benchmarks report, they never fail.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bench._stats import median, ratio

Subject = Literal["value", "ratio", "gap"]
Comparison = Literal[">=", "<="]
_COMPARE = {">=": operator.ge, "<=": operator.le}
_SYMBOL = {">=": "≥", "<=": "≤"}


@dataclass(frozen=True)
class Goal:
    """A threshold on the figure's median value, its ratio to the baseline, or its gap."""

    subject: Subject
    comparison: Comparison
    threshold: float

    def met(
        self, value: float | None, figure_ratio: float | None, gap: float | None = None
    ) -> bool | None:
        measured = {"value": value, "ratio": figure_ratio, "gap": gap}[self.subject]
        if measured is None:
            return None
        return bool(_COMPARE[self.comparison](measured, self.threshold))

    def describe(self, unit: str) -> str:
        threshold = format_number(self.threshold)
        if self.subject == "gap":
            return f"gap {_SYMBOL[self.comparison]} {threshold}"
        suffix = "x" if self.subject == "ratio" else (f" {unit}" if unit else "")
        return f"{_SYMBOL[self.comparison]} {threshold}{suffix}"


@dataclass
class Figure:
    """One line of the table: what was measured, its runs, its baseline's runs, its goals."""

    key: str
    title: str
    unit: str
    values: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    baseline_title: str = ""
    goals: tuple[Goal, ...] = ()
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    reference: list[float] = field(default_factory=list)
    reference_title: str = ""

    @property
    def value(self) -> float | None:
        return median(self.values)

    @property
    def baseline_value(self) -> float | None:
        return median(self.baseline)

    @property
    def ratio(self) -> float | None:
        return ratio(self.value, self.baseline_value)

    @property
    def gap(self) -> float | None:
        """Ratio to the reference minus the baseline's ratio to it (None without a reference)."""
        reference = median(self.reference)
        mine = ratio(self.value, reference)
        theirs = ratio(self.baseline_value, reference)
        return None if mine is None or theirs is None else mine - theirs

    @property
    def met(self) -> bool | None:
        """True/False when every goal could be judged; None when none applies or data is missing."""
        if not self.goals:
            return None
        verdicts = [goal.met(self.value, self.ratio, self.gap) for goal in self.goals]
        if any(verdict is None for verdict in verdicts):
            return None
        return all(verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "unit": self.unit,
            "runs": list(self.values),
            "baseline_title": self.baseline_title,
            "baseline_runs": list(self.baseline),
            "median": self.value,
            "baseline_median": self.baseline_value,
            "ratio": self.ratio,
            "reference_title": self.reference_title,
            "reference_runs": list(self.reference),
            "gap": self.gap,
            "goals": [goal.describe(self.unit) for goal in self.goals],
            "met": self.met,
            "note": self.note,
            "details": self.details,
        }


def format_number(number: float | None) -> str:
    """Three significant digits for small numbers, thousands separators for large ones."""
    if number is None:
        return "-"
    magnitude = abs(number)
    if magnitude >= 1000:
        return f"{number:,.0f}"
    if magnitude >= 100:
        return f"{number:.0f}"
    if magnitude >= 10:
        return f"{number:.1f}"
    return f"{number:.3g}" if magnitude else "0"


def _with_unit(number: float | None, unit: str) -> str:
    text = format_number(number)
    return f"{text} {unit}" if number is not None and unit else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_rows(figure: Figure) -> list[str]:
    """The cells of one figure: figure, value, baseline, ratio, goal, met."""
    goal = ", ".join(goal.describe(figure.unit) for goal in figure.goals) or "-"
    if not figure.values:
        return [figure.title, figure.note or "not measured", "-", "-", goal, "-"]
    baseline = _with_unit(figure.baseline_value, figure.unit)
    if figure.baseline_title and figure.baseline:
        baseline = f"{baseline} ({figure.baseline_title})"
    ratio_text = "-" if figure.ratio is None else f"{figure.ratio:.3f}"
    if figure.gap is not None:
        ratio_text += f" (gap {figure.gap:+.3f} vs {figure.reference_title})"
    met = {True: "yes", False: "**no**", None: "-"}[figure.met]
    return [figure.title, _with_unit(figure.value, figure.unit), baseline, ratio_text, goal, met]


def render_table(figures: Sequence[Figure]) -> str:
    """The Markdown table printed at the end of a run."""
    header = ["figure", "value", "baseline", "ratio", "goal", "met"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] * len(header)) + "|",
    ]
    for figure in figures:
        lines.append("| " + " | ".join(_cell(cell) for cell in table_rows(figure)) + " |")
    return "\n".join(lines) + "\n"


def document(
    figures: Sequence[Figure], mode: str, machine: Mapping[str, Any], started: str, seconds: float
) -> dict[str, Any]:
    """bench/results/latest.json: every raw run, the medians, ratios, goals and the machine."""
    return {
        "mode": mode,
        "started": started,
        "seconds": round(seconds, 1),
        "machine": dict(machine),
        "figures": [figure.to_json() for figure in figures],
        "table": render_table(figures),
    }
