"""The verl files in ``cluster/verl/``: the agent-loop YAML names cudarl's loop with keys its
constructor takes, and every override in ``run_ppo.sh`` names a key verl 0.9.1's own trainer
config has (a renamed key in a later verl fails here, not on a GPU cluster)."""

from __future__ import annotations

import inspect
import re
from importlib import resources
from pathlib import Path

import cachetools  # noqa: F401  (the verl extra, which the lock file installs: a broken install fails, not skips)
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_agent_loop_yaml_names_cudarls_loop_and_keys_it_takes():
    from cudarl.verl_env.agent_loop import CudarlKernelAgentLoop
    from cudarl.verl_env.rows import AGENT_NAME

    (entry,) = yaml.safe_load((ROOT / "cluster" / "verl" / "agent_loops.yaml").read_text())
    assert entry["name"] == AGENT_NAME
    module, _, name = entry["_target_"].rpartition(".")
    assert f"{CudarlKernelAgentLoop.__module__}.{CudarlKernelAgentLoop.__qualname__}" == entry["_target_"]
    accepted = set(inspect.signature(CudarlKernelAgentLoop.__init__).parameters)
    assert set(entry) - {"name", "_target_"} <= accepted


def test_every_override_in_run_ppo_names_a_key_of_verls_trainer_config():
    generated = resources.files("verl.trainer.config") / "_generated_ppo_trainer.yaml"
    config = yaml.safe_load(generated.read_text())

    def has(key: str) -> bool:
        node = config
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    script = (ROOT / "cluster" / "verl" / "run_ppo.sh").read_text()
    overrides = re.findall(r"^\s+([a-z_.]+)=", script, flags=re.MULTILINE)
    assert len(overrides) >= 15
    missing = [key for key in overrides if not has(key)]
    assert missing == []
    assert (ROOT / re.search(r"custom_reward_function.path=(\S+)", script).group(1)).is_file()
    assert (ROOT / re.search(r"agent_loop_config_path=(\S+)", script).group(1)).is_file()
