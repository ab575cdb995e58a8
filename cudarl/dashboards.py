"""Grafana dashboards for cudarl's metrics (``cudarl.metrics``, exported by Ray with the ``ray_``
prefix): training, the tester pool, serving. Each panel is one PromQL expression; the JSON models
are built here from those lists, written to ``dashboards/`` (``cudarl dashboards export``) and
pushed to a Grafana through its HTTP API with ``grafana-client`` (``cudarl dashboards install``).

Why generated: the expressions are the contract with the metrics module, and a test runs every one
of them against a real Prometheus scraping a real Ray cluster; one list serves the JSON, the test
and the docs. ``needs`` marks panels whose data only a GPU gives (bench workers' NVML samples,
speedups of correct kernels: compile-only verdicts have none).

Covered: the panels, the JSON models, export, install. Not covered: alerting rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    legend: str = ""
    unit: str = "short"
    needs: str = ""  # "gpu": only a machine with a GPU gives data (NVML samples, or timed correct kernels)


def _quantile(q: float, metric: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket[5m])))"


DASHBOARDS: dict[str, tuple[str, list[Panel]]] = {
    "training": ("cudarl: training", [
        Panel("Mean reward", "ray_cudarl_train_reward", "{{run}}"),
        Panel("Pass rate per tier", 'ray_cudarl_train_rate{kind="pass"}', "{{run}} {{tier}}", "percentunit"),
        Panel("Compile rate per tier", 'ray_cudarl_train_rate{kind="compile"}', "{{run}} {{tier}}", "percentunit"),
        Panel("Speedup of correct turns", "ray_cudarl_train_speedup", "{{run}} {{stat}}", needs="gpu"),
        Panel("Curriculum tier", "ray_cudarl_train_tier_level", "{{run}}"),
        Panel("Response tokens per second of step",
              'ray_cudarl_train_response_tokens / ignoring(phase) ray_cudarl_train_step_seconds{phase="step"}',
              "{{run}}"),
        Panel("Step time by phase", "ray_cudarl_train_step_seconds", "{{run}} {{phase}}", "s"),
        Panel("Weights version lag", "ray_cudarl_train_version_lag", "{{run}}"),
        Panel("Weights version", "ray_cudarl_train_weights_version", "{{run}}"),
    ]),
    "tester": ("cudarl: tester pool", [
        Panel("Queue depth", "ray_cudarl_tester_queue_depth", "{{pool}} {{stage}}"),
        Panel("Stage latency p50", _quantile(0.5, "ray_cudarl_tester_stage_seconds", "stage"), "{{stage}}", "s"),
        Panel("Stage latency p95", _quantile(0.95, "ray_cudarl_tester_stage_seconds", "stage"), "{{stage}}", "s"),
        Panel("Verdicts by outcome", "sum by (outcome) (ray_cudarl_tester_verdicts_total)", "{{outcome}}"),
        Panel("Cache hit ratio", "ray_cudarl_tester_cache_hit_ratio", "{{pool}} {{cache}}", "percentunit"),
        Panel("Workers", "ray_cudarl_tester_workers", "{{pool}} {{kind}}"),
        Panel("Worker restarts", "sum by (kind) (ray_cudarl_tester_worker_restarts_total) or vector(0)", "{{kind}}"),
        Panel("GPU utilization", "ray_cudarl_gpu_utilization_percent", "{{node}} GPU {{gpu}}", "percent", "gpu"),
        Panel("GPU memory used", "ray_cudarl_gpu_memory_used_bytes", "{{node}} GPU {{gpu}}", "bytes", "gpu"),
    ]),
    "serving": ("cudarl: serving", [
        Panel("Requests by version and status", "sum by (version, status) (ray_cudarl_serve_requests_total)",
              "{{version}} {{status}}"),
        Panel("Latency p50", _quantile(0.5, "ray_cudarl_serve_latency_seconds", "version"), "{{version}}", "s"),
        Panel("Latency p95", _quantile(0.95, "ray_cudarl_serve_latency_seconds", "version"), "{{version}}", "s"),
        Panel("A/B weights", "ray_cudarl_serve_ab_weight", "{{version}}"),
        Panel("Verified-kernel rate per version",
              "sum by (version) (ray_cudarl_serve_verified_total or ray_cudarl_serve_requests_total * 0) / "
              'sum by (version) (ray_cudarl_serve_requests_total{status="200"})', "{{version}}", "percentunit"),
    ]),
}


def dashboard_model(name: str) -> dict:
    """The Grafana JSON model of dashboard ``name`` (a time-series panel per expression, two per
    row), on a ``${datasource}`` variable so it works with any Prometheus data source."""
    title, panels = DASHBOARDS[name]
    source = {"type": "prometheus", "uid": "${datasource}"}
    return {
        "uid": f"cudarl-{name}", "title": title, "tags": ["cudarl"], "timezone": "browser", "schemaVersion": 39,
        "refresh": "10s", "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": [{"id": index + 1, "type": "timeseries", "title": panel.title, "datasource": source,
                    "gridPos": {"x": 12 * (index % 2), "y": 8 * (index // 2), "w": 12, "h": 8},
                    "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                    "targets": [{"refId": "A", "datasource": source, "expr": panel.expr,
                                 "legendFormat": panel.legend}]}
                   for index, panel in enumerate(panels)],
    }


def export(folder: Path) -> list[Path]:
    """Write every dashboard's JSON model into ``folder``; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DASHBOARDS:
        path = folder / f"{name}.json"
        path.write_text(json.dumps(dashboard_model(name), indent=2) + "\n")
        written.append(path)
    return written


def install(url: str, token: str | None = None, folder_title: str = "cudarl") -> list[str]:
    """Create or update every dashboard in the Grafana at ``url`` (a folder ``folder_title``),
    through its HTTP API; the dashboards' URLs there. ``url`` may carry ``user:password@``."""
    from grafana_client import GrafanaApi

    api = GrafanaApi.from_url(url, credential=token) if token else GrafanaApi.from_url(url)
    folders = {f["title"]: f["uid"] for f in api.folder.get_all_folders()}
    folder_uid = folders.get(folder_title) or api.folder.create_folder(folder_title)["uid"]
    urls = []
    for name in DASHBOARDS:
        answer = api.dashboard.update_dashboard({"dashboard": dashboard_model(name), "folderUid": folder_uid,
                                                 "overwrite": True, "message": "cudarl dashboards install"})
        urls.append(answer.get("url", ""))
    return urls
