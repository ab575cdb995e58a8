"""The update worker's adapter export (only the adapters' tensors gathered) equals peft's export
from the whole state dict, tensor for tensor and name for name, for each role."""

from __future__ import annotations

import torch

from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer


def test_adapter_export_equals_the_whole_state_dicts(tmp_path):
    from peft import get_peft_model_state_dict

    from cudarl.rl.update import PolicyUpdater, UpdaterSpec
    from cudarl.rollout.engine import LoraSettings

    tiny_model(tiny_tokenizer()).save_pretrained(tmp_path)
    updater = PolicyUpdater(UpdaterSpec(model=str(tmp_path), adapters=("generator", "optimizer"),
                                        lora=LoraSettings(rank=4, alpha=8)))
    with torch.no_grad():
        for parameter in updater.model.parameters():
            if parameter.requires_grad:
                parameter.normal_()  # B starts at zero: make every adapter tensor tell the roles apart
    whole = {k: v.detach().cpu() for k, v in updater.model.state_dict().items()}
    exports = {}
    for role in ("generator", "optimizer"):
        exports[role] = updater.weights(role)
        expected = get_peft_model_state_dict(updater.model, state_dict=whole, adapter_name=role)
        assert exports[role].keys() == expected.keys() and len(expected) == 28
        assert all(torch.equal(exports[role][k], expected[k]) for k in expected)
    assert not all(torch.equal(exports["generator"][k], exports["optimizer"][k]) for k in exports["generator"])
