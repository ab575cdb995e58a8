"""``_compat.one_gpu_per_process`` against TRL's own check: an ``SFTTrainer`` whose arguments see
several GPUs in one process refuses to start (found running ``cudarl demo`` on a machine with two
GPUs); with the workaround applied it starts on one. The GPUs are simulated through the field the
workaround sets (this machine has none), so an upstream rename of it fails here."""

from __future__ import annotations

import pytest

from cudarl._compat import one_gpu_per_process
from tests.fixtures.tiny_lm import tiny_model, tiny_tokenizer


def _trainer(arguments, tokenizer):
    from datasets import Dataset
    from trl import SFTTrainer

    rows = Dataset.from_list([{"prompt": "a b", "completion": " c d"}])
    return SFTTrainer(model=tiny_model(tokenizer), args=arguments, train_dataset=rows, processing_class=tokenizer)


def test_a_process_seeing_two_gpus_trains_on_one(tmp_path):
    from trl import SFTConfig

    tokenizer = tiny_tokenizer()
    arguments = SFTConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=1)
    assert arguments.n_gpu == 0
    one_gpu_per_process(arguments)
    assert arguments.n_gpu == 0  # no GPU: unchanged
    arguments._n_gpu = 2  # what transformers sets in a process that sees two GPUs
    with pytest.raises(ValueError, match="does not support `nn.DataParallel`"):
        _trainer(arguments, tokenizer)
    one_gpu_per_process(arguments)
    assert arguments.n_gpu == 1
    _trainer(arguments, tokenizer)  # accepted
