"""cudarl inside verl 0.9.1's machinery, on a CPU with a real local Ray and the real tester pool
(compile-only verdicts): the exported parquet loads with verl's own ``RLHFDataset``; the agent
loop runs whole episodes against a real tiny model behind a small implementation of verl's
server-manager ``generate`` (token ids and log-probs from the model), and its token stream,
masks, log-probs and rewards agree with what the engine produced and the tester judged; the
reward function scores a suite solution, a broken kernel and an answer without code apart.
Not covered: verl's trainer (it needs vLLM or SGLang on GPUs)."""

from __future__ import annotations

import asyncio
import json

import cachetools  # noqa: F401  (the verl extra, which the lock file installs: a broken install fails, not skips)
import pytest
import torch

from cudarl.tasks.builtin import load_suite, suite_solutions
from tests.fixtures.tiny_lm import chat_tokenizer, tiny_model

pytestmark = pytest.mark.slow
TASK_ID = "vector_add"
CONFIG = """
[pool]
min_compile_workers = 1
max_compile_workers = 1
min_bench_workers = 0
max_bench_workers = 0

[reward]
format_error = -1.0
compile_failure = -0.5

[algorithm]
gamma = 0.5
"""


class TinyServer:
    """verl's server-manager ``generate`` over a real tiny model: each call samples new tokens (or,
    for a scripted turn, takes the given answer's tokens) and returns the model's log-probs of them."""

    def __init__(self, model, tokenizer, scripted: list[str | None]) -> None:
        self.model, self.tokenizer, self.scripted = model, tokenizer, list(scripted)
        self.calls: list[tuple[list[int], list[int], list[float]]] = []  # (prompt, tokens, log-probs)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        answer = self.scripted.pop(0) if self.scripted else None
        with torch.no_grad():
            if answer is None:
                out = self.model.generate(torch.tensor([prompt_ids]), max_new_tokens=24, do_sample=True,
                                          temperature=1.0, pad_token_id=self.tokenizer.pad_token_id)
                tokens = out[0, len(prompt_ids):].tolist()
            else:
                tokens = self.tokenizer.encode(answer, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            logits = self.model(torch.tensor([prompt_ids + tokens])).logits[0, len(prompt_ids) - 1:-1]
            logprobs = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()
        self.calls.append((list(prompt_ids), tokens, logprobs))
        return TokenOutput(token_ids=tokens, log_probs=logprobs)


def _fenced(source: str) -> str:
    return f"Here is the kernel.\n```python\n{source}\n```"


@pytest.fixture(scope="module")
def env(tmp_path_factory, ray_cluster):
    folder = tmp_path_factory.mktemp("verl")
    (folder / "cudarl.toml").write_text(CONFIG)
    solution = suite_solutions({TASK_ID})[0].source
    tokenizer = chat_tokenizer([solution])
    ray_cluster.ensure()  # the session's Ray: the loop finds or starts the pool there, as in verl's job
    yield {"folder": folder, "config": str(folder / "cudarl.toml"), "tokenizer": tokenizer,
           "model": tiny_model(tokenizer).eval(), "solution": solution,
           "broken": solution.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + undeclared_name[i];")}
    ray_cluster.clear()


def _loop(env, server, **settings):
    """The loop as verl's workers make it: the entry of ``cluster/verl/agent_loops.yaml`` loaded
    with OmegaConf and instantiated by hydra with the arguments verl passes (``settings`` and the
    test's cudarl config override the YAML's keys)."""
    from pathlib import Path

    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    (entry,) = OmegaConf.load(Path(__file__).resolve().parents[2] / "cluster" / "verl" / "agent_loops.yaml")
    entry = OmegaConf.merge(entry, {"cudarl_config": env["config"], **settings})
    trainer = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 8192}}})
    return hydra.utils.instantiate(config=entry, trainer_config=DictConfigWrap(trainer), server_manager=server,
                                   tokenizer=env["tokenizer"], processor=None, hf_model_type=None,
                                   dataset_cls=RLHFDataset, data_config=DictConfigWrap(OmegaConf.create({})),
                                   tools=ToolListWrap([]))


def _episode(env, server, sampling: dict | None = None, **settings):
    """One episode, the loop built inside the running event loop (as verl's workers build it)."""

    async def episode():
        return await _loop(env, server, **settings).run(sampling or {}, **_row())

    return asyncio.run(episode())


def _row(index: int = 0) -> dict:
    from cudarl.verl_env.rows import verl_row

    row = verl_row(next(t for t in load_suite() if t.id == TASK_ID), index, "train")
    return {**row, "raw_prompt": row["prompt"]}


def test_the_exported_parquet_loads_with_verls_dataset(env, tmp_path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from cudarl.verl_env.rows import AGENT_NAME, task_of, write_parquet

    tasks = [t for t in load_suite() if t.tier == "easy"]
    written = write_parquet(tasks, tmp_path, validation_fraction=0.25)
    config = OmegaConf.create({"max_prompt_length": 4096, "return_raw_chat": True, "filter_overlong_prompts": False,
                               "cache_dir": str(tmp_path / "cache")})
    train, val = (RLHFDataset(str(written[split]), env["tokenizer"], config) for split in ("train", "val"))
    assert len(train) + len(val) == len(tasks) and len(val) == round(len(tasks) * 0.25)
    item = train[0]
    assert item["agent_name"] == AGENT_NAME and item["data_source"] == "cudarl"
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]
    task = task_of(item["extra_info"], item["reward_model"]["ground_truth"])
    assert task in tasks and task.id in item["raw_prompt"][1]["content"]
    ids = {task_of(train[i]["extra_info"]).id for i in range(len(train))} | {
        task_of(val[i]["extra_info"]).id for i in range(len(val))}
    assert ids == {t.id for t in tasks}  # every task once, none in both splits


def test_the_agent_loop_keeps_the_engines_tokens_and_scores_each_turn(env):
    from cudarl.config import load_config
    from cudarl.reward import discounted_returns

    server = TinyServer(env["model"], env["tokenizer"], [_fenced(env["broken"]), "no code at all", None,
                                                         _fenced(env["solution"])])
    output = _episode(env, server, {"temperature": 1.0}, max_turns=4)
    turns = json.loads(output.extra_fields["cudarl_turns"])
    assert [t["kind"] for t in turns[:2]] == ["compile_failure", "format_error"]
    assert turns[3]["kind"] == "compiled_only"  # the suite's solution builds; no GPU to run it here
    rewards = [t["reward"] for t in turns]
    assert rewards[:2] == [-0.5, -1.0] and rewards[3] == 0.0
    gamma = load_config(env["config"]).algorithm.gamma
    assert output.reward_score == pytest.approx(discounted_returns(rewards, gamma)[0])
    assert output.extra_fields["turn_scores"] == rewards and output.extra_fields["cudarl_stopped"] == "max_turns"
    # the token stream: the prompt, then each turn's engine tokens (mask 1) and the feedback (mask 0)
    stream = output.prompt_ids + output.response_ids
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    assert server.calls[0][0] == output.prompt_ids
    for prompt, tokens, logprobs in server.calls:
        assert stream[:len(prompt)] == prompt  # each turn's prompt is a prefix: nothing re-tokenized
        start = len(prompt) - len(output.prompt_ids)
        assert output.response_ids[start:start + len(tokens)] == tokens
        assert output.response_mask[start:start + len(tokens)] == [1] * len(tokens)
        assert output.response_logprobs[start:start + len(tokens)] == pytest.approx(logprobs)
    engine_tokens = sum(len(tokens) for _, tokens, _ in server.calls)
    assert sum(output.response_mask) == engine_tokens  # the feedback (and nothing else) is masked out
    feedback = env["tokenizer"].decode([t for t, m in zip(output.response_ids, output.response_mask) if m == 0])
    assert "Improve the kernel" in feedback and feedback.count("Improve the kernel") == 3


def test_the_loop_stops_early_and_the_aggregate_is_configurable(env):
    server = TinyServer(env["model"], env["tokenizer"], ["no code"] * 8)
    output = _episode(env, server, max_turns=2, aggregate="best")
    assert len(server.calls) == 2 and output.reward_score == -1.0
    from hydra.errors import InstantiationException

    with pytest.raises(InstantiationException, match="aggregate must be one of"):  # verl's workers see this
        _loop(env, server, aggregate="mean")
    with pytest.raises(InstantiationException, match=r"max_turns must be in \[1, 64\]"):
        _loop(env, server, max_turns=0)


def test_the_reward_function_scores_solutions_broken_kernels_and_prose_apart(env):
    from cudarl.verl_env.reward_fn import compute_score

    row = _row()

    async def score(text: str) -> dict:
        return await compute_score("cudarl", text, TASK_ID, row["extra_info"], cudarl_config=env["config"])

    async def all_three():
        return await asyncio.gather(score(_fenced(env["solution"])), score(_fenced(env["broken"])),
                                    score("I would write a kernel."))

    solution, broken, prose = asyncio.run(all_three())
    assert (solution["kind"], solution["score"]) == ("compiled_only", 0.0)
    assert (broken["kind"], broken["score"]) == ("compile_failure", -0.5)
    assert (prose["kind"], prose["score"]) == ("format_error", -1.0)
    assert solution["outcome"] == "compiled" and broken["outcome"] == "compile_error"
