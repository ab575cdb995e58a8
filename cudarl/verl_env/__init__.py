"""cudarl's environment inside verl's own trainer (verl 0.9.1): tasks exported as the parquet
rows verl reads (``rows``), a multi-turn agent loop over cudarl's prompts, parser, feedback,
rewards and tester pool (``agent_loop``), and a single-turn reward function in verl's form
(``reward_fn``). The pool is the named Ray actor cudarl's own runs use (``pool``), started on
demand in the verl workers' cluster.

Why a separate package: it imports verl's agent-loop machinery, which cudarl's own trainer never
needs (``pip install cudarl[verl]`` adds what it imports beyond verl's core). Per-turn credit
(discounted returns, turn-level leave-one-out) exists only in cudarl's trainer: verl copies the
final output's reward onto the whole trajectory, so the loop returns one aggregate reward.
"""
