#!/usr/bin/env bash
# GRPO in verl's own trainer on cudarl's tasks, tester and rewards (verl 0.9.1, vLLM rollouts).
# From the project root, on a Ray cluster whose GPU nodes have verl's trainer dependencies:
#   cudarl tasks export --format verl --out /shared/cudarl-verl
#   ray job submit --address http://HEAD:8265 --working-dir . -- bash cluster/verl/run_ppo.sh /shared/cudarl-verl
# Extra hydra overrides may follow the data folder (trainer.n_gpus_per_node=4, ...).
set -euo pipefail
data="${1:?usage: cluster/verl/run_ppo.sh DATA_FOLDER [OVERRIDE ...]}"; shift
exec python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files="$data/train.parquet" \
  data.val_files="$data/val.parquet" \
  data.return_raw_chat=true \
  data.max_prompt_length=4096 \
  data.max_response_length=8192 \
  data.train_batch_size=32 \
  actor_rollout_ref.model.path=Qwen/Qwen2.5-Coder-1.5B-Instruct \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path=cluster/verl/agent_loops.yaml \
  reward.custom_reward_function.path=cudarl/verl_env/reward_fn.py \
  reward.custom_reward_function.name=compute_score \
  trainer.n_gpus_per_node=8 \
  trainer.nnodes=1 \
  trainer.total_epochs=10 \
  "$@"
