"""example/monitoring: the alert rules pass promtool, and every query names what pgshovel serves.

The metric and label names are read from the relay's and the worker's own
registries (``RelayMetrics.series()``, ``WorkerMetrics.series()`` with the
worker's ``target`` label), so a renamed series fails here, not on a
dashboard. promtool (Debian's ``prometheus``, installed by ``make setup``)
checks the rules, and its rule tests fire the leader and lag alerts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from pgshovel.metrics import LABELS, registry_of
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.replication.metrics import WorkerMetrics

MONITORING = Path(__file__).resolve().parents[3] / "example" / "monitoring"
RULES = MONITORING / "pgshovel-alerts.yml"
DASHBOARD = MONITORING / "pgshovel-dashboard.json"
METRIC = re.compile(r"\bpgshovel_[a-z_]+")
#: PromQL words that are not labels inside by (...) / without (...) / selectors
_SELECTOR = re.compile(r"\{([^{}]*)\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


def served() -> tuple[set[str], set[str]]:
    """Metric names (counters with ``_total``) and label names the processes serve."""
    names: set[str] = set()
    labels: set[str] = set()
    registries = [
        registry_of("pgshovel_relay", ("c", "s"), RelayMetrics().series()),
        registry_of("pgshovel_worker", ("c", "s"), WorkerMetrics().series(), {"target": "t"}),
    ]
    for registry, series, constant in zip(
        registries,
        (RelayMetrics().series(), WorkerMetrics().series()),
        ((), ("target",)),
        strict=True,
    ):
        for family in registry.collect():
            names.add(family.name + "_total" if family.type == "counter" else family.name)
        for item in series:
            labels.update(LABELS, constant, item.extra_labels)
    return names, labels


def _expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every alert rule."""
    found = []
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found.append((f"panel {panel['title']!r}", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append((f"variable {variable['name']!r}", variable["query"]))
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            found.append((f"alert {rule['alert']!r}", rule["expr"]))
    return found


def test_every_query_names_a_served_metric_and_its_labels() -> None:
    names, labels = served()
    assert {"pgshovel_relay_backlog_events", "pgshovel_worker_backlog_messages"} <= names
    assert {"pgshovel_relay_table_mutations_total", "pgshovel_worker_table_mutations_total"} <= (
        names
    )
    expressions = _expressions()
    assert len(expressions) > 20
    for where, expression in expressions:
        used = set(METRIC.findall(expression))
        assert used, f"{where}: {expression!r} names no pgshovel metric"
        assert used <= names, f"{where}: {sorted(used - names)} are not served"
        keys = {
            part.split("=")[0].strip(" !~")
            for selector in _SELECTOR.findall(expression)
            for part in selector.split(",")
            if part.strip()
        }
        keys |= {
            name.strip()
            for grouping in _GROUPING.findall(expression)
            for name in grouping.split(",")
            if name.strip()
        }
        label_values = re.findall(r"label_values\([^,]+,\s*(\w+)\)", expression)
        assert keys | set(label_values) <= labels, f"{where}: unknown labels in {expression!r}"


def test_legends_name_labels_the_queries_keep() -> None:
    _names, labels = served()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            assert set(re.findall(r"\{\{(\w+)\}\}", target["legendFormat"])) <= labels, panel


def _promtool() -> str:
    path = shutil.which("promtool")
    assert path is not None, "promtool is missing: make setup installs Debian's prometheus"
    return path


def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout, done.stdout


RULE_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'pgshovel_relay_leader{{cluster="main", set="orders", instance="a"}}'
        values: '1 1 0 0 0 0 0'
      - series: 'pgshovel_relay_leader{{cluster="main", set="orders", instance="b"}}'
        values: '0 0 0 0 0 0 0'
      - series: 'pgshovel_relay_lag_seconds{{cluster="main", set="orders", instance="a"}}'
        values: '0 0 90 150 210 270 330 390 450'
    alert_rule_test:
      - eval_time: 3m
        alertname: PgshovelNoRelayLeader
        exp_alerts: []
      - eval_time: 5m
        alertname: PgshovelNoRelayLeader
        exp_alerts:
          - exp_labels: {{severity: critical, cluster: main, set: orders}}
            exp_annotations:
              summary: "pgshovel set main/orders: no relay leads"
              description: "{leader}"
      - eval_time: 8m
        alertname: PgshovelRelayLagHigh
        exp_alerts:
          - exp_labels: {{severity: warning, cluster: main, set: orders}}
            exp_annotations:
              summary: "pgshovel set main/orders: changes wait 7m 30s for Kafka"
              description: "{lag}"
"""


def test_the_leader_and_lag_alerts_fire(tmp_path: Path) -> None:
    descriptions = {
        rule["alert"]: rule["annotations"].get("description", "")
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
    }
    tests = tmp_path / "tests.yml"
    tests.write_text(
        RULE_TESTS.format(
            rules=json.dumps(str(RULES)),
            leader=descriptions["PgshovelNoRelayLeader"],
            lag=descriptions["PgshovelRelayLagHigh"],
        )
    )
    done = subprocess.run(
        [_promtool(), "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
