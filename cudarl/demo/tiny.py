"""A tiny chat model built here, for runs where no real model is configured or reachable (the
demo without a hub, tests): a byte-level BPE tokenizer trained on the spot on the texts the run
will show it (prompts and kernels), with a ChatML template and ``<|im_end|>`` as its end of turn
as chat models have, and a Qwen2-architecture model with random weights from a config.

A random model would leave the warm start everything to learn; so the model is first trained
for a few hundred fast steps as a plain language model on ``pretrain_texts`` (the kernels), as
a real code model has seen code before it is fine-tuned. The warm start then teaches it when to
write which kernel and in what layout, through LoRA as for a real model.

Covered: building, pretraining and saving both so ``AutoTokenizer`` / ``AutoModelForCausalLM``
load the folder like a hub model's. Not covered: the warm start (``cudarl.sft``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = ("<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@dataclass(frozen=True)
class TinyShape:
    """The tiny model's shape (Qwen2 names)."""

    hidden_size: int = 128
    """Width; 64 per attention head at the default 2 heads, which every attention kernel takes."""
    intermediate_size: int = 256
    layers: int = 2
    heads: int = 2
    kv_heads: int = 1
    max_positions: int = 8192
    """Longest sequence: a multi-turn prompt holds the task, earlier kernels and their feedback."""
    vocab_size: int = 4000
    """Target size of the BPE vocabulary (the trained one may be smaller on little text)."""
    output_std: float = 0.15
    """Standard deviation of the output layer's random weights. Why not the config's 0.02: after
    the final norm the hidden state has length sqrt(width), so at width 128 and 0.02 the best
    aligned logit is about 2.6 and every next-token distribution stays near uniform whatever
    the adapters (which do not touch the output layer) learn; at 0.15 it can reach about 19."""


def train_chat_tokenizer(texts: Sequence[str], vocab_size: int = 4000):
    """A byte-level BPE tokenizer trained on ``texts``, ChatML template, ``<|im_end|>`` as EOS."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    # Qwen2's own normalizer and split: transformers loads a Qwen2 model's folder with the Qwen2
    # tokenizer class, which rebuilds both whatever tokenizer.json says, and merges learned under
    # another split would then apply differently (measured: 2,195 tokens for the system prompt
    # instead of 1,422)
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="<unk>")
    fast.chat_template = CHATML
    return fast


def build_tiny_model(folder: Path, texts: Sequence[str], pretrain_texts: Sequence[str] = (),
                     shape: TinyShape = TinyShape(), seed: int = 0, pretrain_steps: int = 200,
                     say=lambda line: None) -> Path:
    """Tokenizer (trained on ``texts``) and a Qwen2 model, pretrained on ``pretrain_texts`` for
    ``pretrain_steps`` steps when there are any, saved together in ``folder``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = train_chat_tokenizer(texts, shape.vocab_size)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=shape.hidden_size,
                         intermediate_size=shape.intermediate_size, num_hidden_layers=shape.layers,
                         num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
                         max_position_embeddings=shape.max_positions, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, shape.output_std)
    if pretrain_texts and pretrain_steps > 0:
        pretrain(model, tokenizer, pretrain_texts, pretrain_steps, say=say)
    model.eval().save_pretrained(folder)
    return folder


def pretrain(model, tokenizer, texts: Sequence[str], steps: int, learning_rate: float = 3e-3, say=lambda line: None):
    """Every weight trained as a language model on all of ``texts`` at once (one padded batch),
    AdamW at ``learning_rate`` (3e-3: a width-128 model memorized a 346-token text in about 100
    steps at it, and 1e-2 stalled). Returns the last loss."""
    import torch

    encoded = [list(tokenizer.encode(text, add_special_tokens=False)) + [tokenizer.eos_token_id] for text in texts]
    length = max(len(ids) for ids in encoded)
    ids = torch.full((len(encoded), length), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(encoded), length), -100, dtype=torch.long)
    for row, tokens in enumerate(encoded):
        ids[row, :len(tokens)] = torch.tensor(tokens)
        labels[row, :len(tokens)] = torch.tensor(tokens)
    attention = (labels != -100).long()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    loss = float("nan")
    for step in range(steps):
        output = model(input_ids=ids, attention_mask=attention, labels=labels)
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss = float(output.loss.detach())
        if (step + 1) % 50 == 0 or step + 1 == steps:
            say(f"      pretraining the tiny model on {len(texts)} texts: step {step + 1}/{steps}, loss {loss:.3f}")
    return loss
