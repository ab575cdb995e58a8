"""The cluster files parse and point at things that exist: the launcher YAML's node types, the
runtime environment's keys (Ray's own ``RuntimeEnv`` checks them), the KubeRay manifests' kinds,
the RayJob's entry point (parsed by the ``cudarl`` command's own parser) and config file (loaded),
the RayService's application (imported) and its settings file (loaded). KubeRay's CRD schemas
ship with no Python package reachable here, so the manifests are checked by these rules only."""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path

import yaml

from cudarl.cli.main import build_parser
from cudarl.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def _load(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def test_the_launcher_yaml_has_every_node_type_the_project_needs():
    spec = _load("cluster/cluster.yaml")
    types = spec["available_node_types"]
    assert spec["head_node_type"] in types
    assert {"cpu_compile", "gpu_bench", "gpu_train"} <= set(types)
    assert all(types[name]["resources"].get("GPU", 0) >= 1 for name in ("gpu_bench", "gpu_train"))
    assert sum(t.get("max_workers", 0) for t in types.values()) <= spec["max_workers"]


def test_the_runtime_env_is_one_ray_accepts():
    from ray.runtime_env import RuntimeEnv

    env = RuntimeEnv(**_load("cluster/runtime_env.yaml"))
    assert env["env_vars"]["NCCL_NVLS_ENABLE"] == "0"


def test_kuberay_manifests_name_real_entry_points_and_files():
    cluster, job, service = (_load(f"cluster/kuberay/{name}.yaml") for name in ("raycluster", "rayjob", "rayservice"))
    assert [m["kind"] for m in (cluster, job, service)] == ["RayCluster", "RayJob", "RayService"]
    assert all(m["apiVersion"] == "ray.io/v1" for m in (cluster, job, service))
    groups = {g["groupName"] for g in cluster["spec"]["workerGroupSpecs"]}
    assert groups == {"cpu-compile", "gpu-bench", "gpu-train"}
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[0] == "cudarl"
    args = build_parser().parse_args(argv[1:])  # the command's own parser: a renamed option fails here
    assert args.command == "train" and load_config(ROOT / args.config).train.ranks == 2
    yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    module, _, name = app["import_path"].partition(":")
    assert callable(getattr(importlib.import_module(module), name))
    load_config(ROOT / app["args"]["config"])


def test_every_training_config_loads_and_its_plan_packs_on_the_gpus_it_is_for():
    from cudarl.rl.placement import plan_placement, run_slots

    two_gpus = load_config(ROOT / "cluster" / "train-2gpu.toml")
    plan = plan_placement(run_slots(two_gpus), [2])
    by_gpu = {}
    for slot, where in zip(plan.slots, plan.assignment):
        by_gpu.setdefault(where, []).append(slot.worker.split(" ")[0])
    assert sorted(map(sorted, by_gpu.values())) == [["bench", "update"], ["policy", "update"]]
    several = load_config(ROOT / "cluster" / "train.toml")  # two GPU nodes of two GPUs, one worker per GPU
    several = several.model_copy(update={"pool": several.pool.model_copy(update={"min_bench_workers": 1})})
    assert len(set(plan_placement(run_slots(several), [0, 2, 2]).assignment)) == 4
