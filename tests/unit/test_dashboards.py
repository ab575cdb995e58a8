"""The dashboards' JSON files are the ones ``cudarl.dashboards`` builds (nobody edited one by hand
or forgot to export), every panel has one expression on the datasource variable, and the panel
titles the issue names are there."""

from __future__ import annotations

import json
from pathlib import Path

from cudarl.dashboards import DASHBOARDS, dashboard_model, export

ROOT = Path(__file__).resolve().parents[2]


def test_committed_files_equal_the_built_models(tmp_path):
    for path in export(tmp_path):
        assert json.loads(path.read_text()) == json.loads((ROOT / "dashboards" / path.name).read_text()), path.name


def test_every_panel_queries_the_chosen_prometheus():
    uids = set()
    for name in DASHBOARDS:
        model = dashboard_model(name)
        uids.add(model["uid"])
        for panel in model["panels"]:
            (target,) = panel["targets"]
            assert target["expr"].strip() and target["datasource"]["uid"] == "${datasource}"
    assert len(uids) == len(DASHBOARDS)
    titles = {panel.title for _, panels in DASHBOARDS.values() for panel in panels}
    assert {"Mean reward", "Weights version lag", "Queue depth", "Stage latency p95", "Cache hit ratio",
            "A/B weights", "Verified-kernel rate per version", "GPU utilization"} <= titles
