"""Training samples and their tensors (``cudarl.rl.batch``): the engine's log-probs, the mask and
the advantage land on the columns that score the response tokens, and the model's log-probs are
read from the same columns."""

from __future__ import annotations

import pytest
import torch

from cudarl.rl.batch import TrainSample, batch_counts, collate, deal, token_logprobs
from cudarl.rl.group import plan_step


def _sample(ids, prompt_length, advantage=1.0):
    return TrainSample(token_ids=tuple(ids), prompt_length=prompt_length,
                       old_logprobs=tuple(-float(i) for i in range(1, len(ids) - prompt_length + 1)),
                       advantage=advantage, weights_version=3)


def test_collate_puts_the_response_on_the_columns_that_predict_it():
    batch = collate([_sample([5, 6, 7, 8, 9], 3, 0.5), _sample([1, 2, 3], 2, -1.0)], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9], [1, 2, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    # row 0: response tokens 8, 9 at positions 3, 4 are predicted by columns 2, 3
    assert batch["response_mask"].tolist() == [[0, 0, 1, 1], [0, 1, 0, 0]]
    assert batch["old_logprobs"].tolist() == [[0, 0, -1, -2], [0, -1, 0, 0]]
    assert batch["advantages"].tolist() == [[0, 0, 0.5, 0.5], [0, -1, 0, 0]]


def test_token_logprobs_read_the_next_tokens_score():
    class Fixed(torch.nn.Module):  # a "model" whose logits at every position favour token (position + 1) % 4
        def forward(self, input_ids, attention_mask):
            logits = torch.zeros(*input_ids.shape, 4)
            for position in range(input_ids.shape[1]):
                logits[:, position, (position + 1) % 4] = 2.0
            return type("Out", (), {"logits": logits})()

    values = token_logprobs(Fixed(), torch.tensor([[0, 1, 3]]), torch.ones(1, 3, dtype=torch.long))
    hit, miss = torch.log_softmax(torch.tensor([2.0, 0, 0, 0]), 0)[:2].tolist()
    assert values.tolist()[0] == pytest.approx([hit, miss])  # token 1 was favoured at 0; token 3 was not at 1


def test_shards_are_even_and_counts_global():
    samples = [_sample([1] * n, 1) for n in (9, 2, 5, 3, 7)]
    shards = deal(samples, 2)
    assert [sorted(len(s.token_ids) for s in part) for part in shards] == [[2, 5, 9], [3, 7]]  # longest first, in turn
    assert batch_counts(samples, ranks=2).tokens == 8 + 1 + 4 + 2 + 6
    assert [len(part) for part in deal(samples[:2], 3)] == [1, 1, 0]


def test_every_rank_runs_the_same_micro_batches_per_adapter():
    def role(n, adapter):
        return TrainSample(token_ids=(1,) * n, prompt_length=1, old_logprobs=(-1.0,) * (n - 1), advantage=1.0,
                           weights_version=0, adapter=adapter)

    samples = [role(4, "generator"), role(3, "generator"), role(6, "generator"), role(5, "optimizer")]
    shards, plan = plan_step(samples, ranks=2, micro_batch=1, by_adapter=True)
    assert [[s.adapter for s in part] for part in shards] == [["generator", "generator", "optimizer"], ["generator"]]
    # generator: 2 + 1 samples over the ranks -> both run 2 micro-batches; optimizer: 1 + 0 -> both run 1
    assert {name: (p.micro_batches, p.counts.tokens, p.counts.ranks) for name, p in plan.items()} == {
        "generator": (2, 3 + 2 + 5, 2), "optimizer": (1, 4, 2)}
    with pytest.raises(ValueError, match="samples without an adapter"):
        plan_step([role(3, None)], ranks=1, micro_batch=1, by_adapter=True)


def test_inconsistent_samples_are_refused():
    with pytest.raises(ValueError, match="2 response tokens but 1 log-probs"):
        TrainSample(token_ids=(1, 2, 3), prompt_length=1, old_logprobs=(-1.0,), advantage=0.0, weights_version=0)
    with pytest.raises(ValueError, match="needs a prompt and a response"):
        TrainSample(token_ids=(1, 2), prompt_length=2, old_logprobs=(), advantage=0.0, weights_version=0)


def _tiny_qwen(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return Qwen2ForCausalLM(config)


def _through_the_whole_forward(model, ids, temperature):
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, :-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)


@pytest.mark.parametrize("lora", [False, True])
def test_split_head_log_probs_and_gradients_equal_the_whole_forwards(lora, monkeypatch):
    import cudarl.rl.batch as batch_module

    monkeypatch.setattr(batch_module, "LOGPROB_CHUNK", 5)  # several chunks, the last one short
    model = _tiny_qwen()
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    ids = torch.randint(0, 64, (3, 17))
    assert batch_module.decoder_and_head(model, ids) is not None  # the split path is the one under test
    got = token_logprobs(model, ids, torch.ones_like(ids), temperature=0.7)
    got.sum().backward()
    got_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad()
    want = _through_the_whole_forward(model, ids, 0.7)
    want.sum().backward()
    assert got.shape == (3, 16)
    assert torch.allclose(got, want, atol=1e-5)
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            assert torch.allclose(got_grads[name], parameter.grad, atol=1e-5), name


def test_a_model_whose_forward_scales_its_logits_takes_the_whole_forward():
    from transformers import Qwen2ForCausalLM

    import cudarl.rl.batch as batch_module

    class Scaled(Qwen2ForCausalLM):  # a forward that is more than head(decoder(...)), as logit scaling is
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 3.0
            return out

    base = _tiny_qwen()
    model = Scaled(base.config)
    model.load_state_dict(base.state_dict())
    ids = torch.randint(0, 64, (2, 9))
    assert batch_module.decoder_and_head(model, ids) is None
    assert torch.allclose(token_logprobs(model, ids, torch.ones_like(ids)), _through_the_whole_forward(model, ids, 1.0),
                          atol=1e-5)


@pytest.mark.parametrize("split", [True, False])
def test_columns_before_from_column_are_skipped_and_the_rest_equal_the_whole_forwards(split, monkeypatch):
    import cudarl.rl.batch as batch_module

    monkeypatch.setattr(batch_module, "LOGPROB_CHUNK", 4)
    if not split:
        monkeypatch.setattr(batch_module, "decoder_and_head", lambda model, ids=None: None)
    model = _tiny_qwen(seed=1)
    ids = torch.randint(0, 64, (2, 15))
    mask = torch.zeros(2, 14)
    mask[:, 6:] = 1.0  # the loss's columns: a prompt of 7 tokens
    got = token_logprobs(model, ids, torch.ones_like(ids), from_column=6)
    (got * mask).sum().backward()
    got_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    want = _through_the_whole_forward(model, ids, 1.0)
    (want * mask).sum().backward()
    assert got.shape == (2, 14)
    assert torch.equal(got[:, :6], torch.zeros(2, 6))
    assert torch.allclose(got[:, 6:], want[:, 6:], atol=1e-5)
    for name, parameter in model.named_parameters():
        assert torch.allclose(got_grads[name], parameter.grad, atol=1e-5), name
    with pytest.raises(ValueError, match="from_column 14 outside the 14 predicted positions"):
        token_logprobs(model, ids, torch.ones_like(ids), from_column=14)
