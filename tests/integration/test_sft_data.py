"""Warm-start data: archive kernels rewritten as candidates the guard accepts, examples in the RL
prompts' own words for both roles (suite, archive parquet written here in the archive's schema,
JSONL), and rows tokenized exactly as episodes tokenize (prompt by the chat template, answer +
end-of-sequence) with every dropped example counted by reason and the held-out side by task."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cudarl.agents.parsing import parse_answer
from cudarl.agents.prompts import generator_prompt, system_prompt
from cudarl.rollout.chat import ChatTokens
from cudarl.sft.archive_candidates import NotConvertible, archive_candidate
from cudarl.sft.dataset import build_rows, drop_near_duplicates, is_held_out
from cudarl.sft.examples import archive_examples, jsonl_examples, suite_examples
from cudarl.tasks.builtin import load_suite
from cudarl.tasks.report import LoadReport
from cudarl.tasks.sakana import REQUIRED_COLUMNS, load_sakana
from cudarl.tester.build.guard import inspect_source
from tests.fixtures.tiny_lm import chat_tokenizer

RELU_MODULE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return []
"""

RELU_FUNCTIONAL = """import torch
import torch.nn as nn
import torch.nn.functional as F


def module_fn(x: torch.Tensor) -> torch.Tensor:
    return F.relu(x)


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, fn=module_fn):
        return fn(x)


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return []
"""


def relu_cuda(variant: int) -> str:
    """Archive-style .cu files: a kernel, a host function named forward, its own binding."""
    unroll = "\n".join(f"    // variant {variant} step {step}" for step in range(variant))
    return f"""#include <torch/extension.h>

__global__ void relu_kernel_v{variant}(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{
    int64_t i = (int64_t)blockIdx.x * blockDim.x * {variant + 1} + threadIdx.x;
{unroll}
    for (int k = 0; k < {variant + 1}; ++k, i += blockDim.x) if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}}

torch::Tensor forward(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = {128 * (variant + 1)};
    relu_kernel_v{variant}<<<(n + threads - 1) / threads, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("forward", &forward, "ReLU (CUDA)"); }}
"""


def test_an_archive_kernel_becomes_a_candidate_the_guard_accepts():
    source = archive_candidate(relu_cuda(1), RELU_FUNCTIONAL, "19_ReLU_vectorized")
    result = inspect_source(source)
    assert result.ok, result.reasons
    assert result.format == "inline" and result.kernel_names == ["relu_kernel_v1"]
    assert "module_fn" not in source and "get_inputs" not in source  # the PyTorch version is gone
    assert "super(_ArchiveModel, self)" in source and 'name="archive_19_ReLU_vectorized_' in source
    compile(source, "candidate", "exec")


@pytest.mark.parametrize(("cuda", "functional", "reason"), [
    ("__global__ void k() {}", RELU_FUNCTIONAL, "binds no forward"),
    (relu_cuda(1), RELU_FUNCTIONAL.replace("fn=module_fn", "scale=1.0"), "takes no fn"),
    (relu_cuda(1), "def module_fn(x): return x", "no class Model"),
    (relu_cuda(1), "class Model(:", "does not parse"),
])
def test_archive_rows_in_another_layout_are_refused_with_the_reason(cuda, functional, reason):
    with pytest.raises(NotConvertible, match=reason):
        archive_candidate(cuda, functional, "x")


def _archive(tmp_path, speedups: list[float], correct: list[bool]) -> str:
    rows = {column: [] for column in REQUIRED_COLUMNS}
    for index, (speedup, ok) in enumerate(zip(speedups, correct)):
        cuda = relu_cuda(index) if index != 1 else "__global__ void broken() {}"  # row 1: no binding
        values = {"Op_Name": "ReLU", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": f"relu_variant_{index}",
                  "CUDA_Code": cuda, "PyTorch_Code_Module": RELU_MODULE, "PyTorch_Code_Functional": RELU_FUNCTIONAL,
                  "Correct": ok, "CUDA_Speedup_Native": speedup, "CUDA_Speedup_Compile": speedup,
                  "Max_Diff": 0.0, "Error": ""}
        for column, value in values.items():
            rows[column].append(value)
    pq.write_table(pa.table(rows), tmp_path / "level_1.parquet")
    return str(tmp_path)


def test_archive_examples_teach_both_roles_from_recorded_speedups(tmp_path):
    tasks, kernels, report = load_sakana(_archive(tmp_path, [0.8, 3.0, 1.5, 2.4, 9.0],
                                                  [True, True, True, True, False]), splits=("level_1",))
    examples = archive_examples(tasks, kernels, report, per_task=2, pairs_per_task=1)
    generators = [e for e in examples if e.role == "generator"]
    optimizers = [e for e in examples if e.role == "optimizer"]
    assert [e.origin.rsplit(":", 1)[1] for e in generators] == ["relu_variant_3", "relu_variant_2"]  # fastest first
    assert any("binds no forward" in s.reason for s in report.skipped)  # variant 1, counted; variant 4 incorrect
    assert len(optimizers) == 1 and optimizers[0].origin.endswith("relu_variant_0->relu_variant_3")
    prompt = optimizers[0].user
    assert "0.8x" in prompt and "recorded by the archive" in prompt and "relu_kernel_v0" in prompt
    for example in examples:
        parsed = parse_answer(example.answer)
        assert parsed.ok and parsed.source.strip() == example.candidate.strip() and parsed.strategy
        assert example.system == system_prompt()
    assert generators[0].user == generator_prompt(tasks[0])


def test_suite_examples_are_generator_turns_in_the_rl_prompts_words():
    tasks = load_suite()
    examples = suite_examples(tasks)
    assert len(examples) >= len(tasks)  # every inline solution, and the nvrtc ones
    by_id = {task.id: task for task in tasks}
    for example in examples[:5] + examples[-3:]:
        assert example.role == "generator" and example.user == generator_prompt(by_id[example.task_id])
        assert parse_answer(example.answer).source.strip() == example.candidate.strip()
    assert {"inline", "nvrtc"} <= {inspect_source(e.candidate).format for e in examples}


def test_jsonl_pairs_are_read_and_every_bad_line_is_counted_with_its_place(tmp_path):
    tasks = load_suite()
    good = suite_examples(tasks[:1])[0]
    lines = [json.dumps({"task_id": good.task_id, "answer": good.candidate, "strategy": "tiles"}),
             "{not json",
             json.dumps({"task_id": "no-such-task", "answer": "x"}),
             json.dumps({"task_id": good.task_id, "answer": "just prose, no code"}),
             json.dumps({"task_id": good.task_id, "answer": good.candidate, "role": "optimizer"}),
             json.dumps({"task_id": good.task_id, "answer": good.candidate, "role": "optimizer",
                         "previous": good.candidate, "previous_speedup": 1.5})]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = LoadReport(source=str(path))
    examples = jsonl_examples(path, tasks, report)
    assert [e.role for e in examples] == ["generator", "optimizer"] and report.kept == 2 and report.seen == 6
    assert [s.where.rsplit(":", 1)[1] for s in report.skipped] == ["2", "3", "4", "5"]
    assert "Strategy: tiles" in examples[0].answer and "1.5x" in examples[1].user


def test_rows_are_the_episode_layout_and_every_drop_has_a_reason():
    tasks = load_suite()
    examples = suite_examples(tasks)
    rejected = examples[0].__class__(**{**examples[0].__dict__, "candidate": "print('no kernel')",
                                        "origin": "hack"})
    duplicate = examples[0].__class__(**{**examples[0].__dict__, "candidate": examples[0].candidate + "\n# again\n",
                                         "origin": "copy"})
    tokenizer = chat_tokenizer([e.answer for e in examples[:10]])
    chat = ChatTokens(tokenizer)
    data = build_rows(examples + [rejected, duplicate], chat, max_length=6000, held_out_fraction=0.3)
    assert data.dropped["guard: rejected"] == 1 and data.dropped["near-duplicate"] == 1
    rows = data.train + data.held_out
    assert len(rows) + sum(data.dropped.values()) == data.examples_in
    assert data.held_out and data.train
    assert not {r.task_id for r in data.train} & {r.task_id for r in data.held_out}  # split by task
    assert all(is_held_out(r.task_id, 0.3) for r in data.held_out)
    example = next(e for e in examples if e.origin == rows[0].origin)
    assert list(rows[0].prompt_ids) == chat.prompt(example.system, example.user)
    assert list(rows[0].completion_ids) == chat.encode(example.answer) + [tokenizer.eos_token_id]
    short = build_rows(examples, chat, max_length=64)
    assert short.dropped["longer than max_length"] == len(drop_near_duplicates(examples)[0])
    stats = data.statistics()
    assert stats["train"]["rows"] == len(data.train) and stats["held_out"]["tasks"] >= 1
    with pytest.raises(ValueError, match="held_out_fraction"):
        build_rows(examples, chat, max_length=6000, held_out_fraction=1.0)


def test_an_archive_file_that_is_not_parquet_is_named_in_one_error(tmp_path):
    from cudarl.tasks.task import TaskError

    (tmp_path / "level_1.parquet").write_text("not parquet at all")
    with pytest.raises(TaskError, match=r"level_1\.parquet: cannot be read as parquet"):
        load_sakana(tmp_path, splits=("level_1",))
