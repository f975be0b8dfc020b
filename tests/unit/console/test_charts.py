"""The console's SVG line charts: well-formed, escaped, windowed, with round axis ticks."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from pgshovel.console.charts import Series, format_value, line_chart, nice_step

SVG = "{http://www.w3.org/2000/svg}"
END = 10_000.0


def parse(svg: str) -> ElementTree.Element:
    return ElementTree.fromstring(svg)  # noqa: S314 (our own output, in a test)


def texts(root: ElementTree.Element) -> list[str]:
    return [element.text or "" for element in root.iter(f"{SVG}text")]


def test_one_line_per_series_with_a_legend_and_axes() -> None:
    lag = [(END - 3000 + 10 * i, float(i % 7)) for i in range(300)]
    rate = [(END - 3000 + 10 * i, 100.0 + i) for i in range(300)]
    root = parse(
        line_chart(
            [Series("relay", lag), Series("copy", rate)], title="Lag", unit="seconds", end=END
        )
    )
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 2
    labels = texts(root)
    assert {"Lag", "seconds", "relay", "copy", "now", "-60 min", "-30 min"} <= set(labels)
    # y ticks from 0 past the largest value (399), round steps
    assert "0" in labels and "400" in labels


def test_labels_are_escaped_and_nothing_can_run() -> None:
    svg = line_chart(
        [Series('<script>alert("x")</script>', [(END - 5, 1.0), (END, 2.0)])],
        title="a & b",
        unit="<u>",
        end=END,
    )
    assert "<script" not in svg and "&lt;script&gt;" in svg
    root = parse(svg)  # well-formed
    assert "a & b" in texts(root)


def test_points_outside_the_window_are_left_out_and_gaps_break_the_line() -> None:
    points = [
        (END - 7200, 50.0),  # two hours ago: not drawn, and not in the scale
        (END - 600, 1.0),
        (END - 590, 2.0),
        (END - 300, 3.0),  # 290 s later: a new segment of one point
        (END - 100, 4.0),
        (END - 90, 5.0),
    ]
    root = parse(line_chart([Series("relay", points)], title="t", unit="s", end=END, gap=60))
    assert len(root.findall(f"{SVG}polyline")) == 2
    assert len(root.findall(f"{SVG}circle")) == 1
    assert "50" not in texts(root)  # the scale ends at 5 or so


def test_an_empty_chart_says_so() -> None:
    root = parse(line_chart([Series("relay", [])], title="t", unit="s", end=END))
    assert "no samples in this window yet" in texts(root)
    assert not root.findall(f"{SVG}polyline")


def test_ticks_are_round() -> None:
    assert nice_step(0) == 1.0
    assert nice_step(7.3) == 2
    assert nice_step(0.9) == 0.25
    assert nice_step(12_345) == 5000
    assert [format_value(i * 0.25, 0.25) for i in range(3)] == ["0.00", "0.25", "0.50"]
    assert format_value(15_000, 5000) == "15k"
    assert format_value(3_000_000, 1_000_000) == "3M"
    assert format_value(40, 20) == "40"
