"""The warm start: supervised fine-tuning of the generator and the optimizer (QLoRA on CUDA,
LoRA on a CPU) on examples laid out as the RL phase lays out its conversations."""
