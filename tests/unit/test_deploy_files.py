"""The deploy files parse, name entry points that import, and config files that load."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from cudarl.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_serve_yaml_names_an_importable_app_and_a_loadable_config():
    spec = yaml.safe_load((ROOT / "deploy" / "serve.yaml").read_text())
    (app,) = spec["applications"]
    module, _, name = app["import_path"].partition(":")
    assert callable(getattr(importlib.import_module(module), name))
    config = load_config(ROOT / app["args"]["config"])
    assert config.serve.split_weights() == {"base": 1.0} and config.serve.rollback_below == 0.2
    assert spec["http_options"]["port"] == config.serve.port
