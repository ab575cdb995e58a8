"""The kernel grids (``cudarl.rl.kernel_choices``) without a compiler: every choice renders into a
candidate of its suite task that the tester's guard accepts as nvrtc source, with its parameters
in the CUDA text and the deliberate bugs where they are meant to be; and the decoding of a
response into a choice. Compiling every choice: ``tests/integration/test_kernel_choices_compile.py``."""

from __future__ import annotations

import pytest

from cudarl.rl.kernel_choices import TASKS, candidate_id, choices, decode, describe, render, render_all
from cudarl.tasks.builtin import load_suite
from cudarl.tester.build.guard import inspect_source


def test_every_grid_belongs_to_a_suite_task_and_mixes_fast_slow_and_wrong():
    suite = {task.id for task in load_suite()}
    assert set(TASKS) <= suite
    for task_id in TASKS:
        grid = choices(task_id)
        assert 8 <= len(grid) <= 16, task_id
        assert len({c.name for c in grid}) == len(grid), f"{task_id}: names must be unique"
        expected = {c.expect for c in grid}
        assert {"fast", "slow", "wrong"} <= expected, (task_id, expected)
        assert sum(c.expect == "wrong" for c in grid) <= 2
        assert all(c.why for c in grid)


def test_every_choice_renders_into_a_candidate_the_guard_accepts():
    candidates = render_all()
    assert len(candidates) == sum(len(choices(t)) for t in TASKS)
    assert len({c.id for c in candidates}) == len(candidates)
    assert len({c.source_hash for c in candidates}) == len(candidates), "two choices render the same source"
    for candidate in candidates:
        guard = inspect_source(candidate.source)
        assert guard.ok, (candidate.id, guard.reasons)
        assert guard.format == "nvrtc", candidate.id
        assert guard.kernel_names, candidate.id


def test_rendering_is_deterministic_and_carries_the_parameters():
    for task_id in TASKS:
        for index, choice in enumerate(choices(task_id)):
            candidate = render(task_id, index)
            assert candidate == render(task_id, index)
            assert candidate.task_id == task_id
            assert candidate.id == candidate_id(task_id, index) == f"{task_id}/choice-{index:02d}-{choice.name}"
            for name, value in choice.params.items():
                assert f"#define {name} {value}\n" in candidate.source, (candidate.id, name)


def test_the_deliberate_bugs_are_in_the_wrong_choices_only():
    by_name = {(t, c.name): render(t, i) for t in TASKS for i, c in enumerate(choices(t))}
    # vector_add: float4 without the n % 4 tail
    assert "#define TAIL 0" in by_name["vector_add", "float4_b256_notail"].source
    assert "#define TAIL 1" in by_name["vector_add", "float4_b256"].source
    # row_sum: a tree over a block that is not a power of two; a grid rounded down
    assert "#define BLOCK 384" in by_name["row_sum", "block_per_row_b384_tree"].source
    assert "#define SHUFFLE 0" in by_name["row_sum", "block_per_row_b384_tree"].source
    assert "max(1, rows // 8)" in by_name["row_sum", "warp_per_row_b256_floorgrid"].source
    assert "rows // 8" not in by_name["row_sum", "warp_per_row_b256"].source
    # matmul: the k-loop stops at the last whole tile
    assert "#define K_TAIL 0" in by_name["matmul", "smem_tile32_no_k_tail"].source
    for task_id in TASKS:
        for choice in choices(task_id):
            if choice.expect != "wrong":
                source = by_name[task_id, choice.name].source
                assert "#define TAIL 0" not in source and "#define K_TAIL 0" not in source
                assert "#define FLOOR_GRID 1" not in source, choice.name


def test_tree_reductions_use_power_of_two_blocks_except_the_wrong_one():
    for choice in choices("row_sum"):
        if choice.family == "block" and not choice.params["SHUFFLE"]:
            block = choice.params["BLOCK"]
            power_of_two = block & (block - 1) == 0
            assert power_of_two == (choice.expect != "wrong"), choice.name


def test_bad_indices_and_tasks_are_refused():
    with pytest.raises(IndexError, match="vector_add has 9 choices"):
        render("vector_add", len(choices("vector_add")))
    with pytest.raises(IndexError):
        render("vector_add", -1)
    with pytest.raises(KeyError, match="no kernel choices for task 'relu'"):
        choices("relu")


def test_decode_takes_the_first_token_modulo_the_choices():
    assert decode((0,), 9) == 0
    assert decode((13, 5, 7), 9) == 4
    assert decode((127,), 9) == 127 % 9
    assert decode((), 9) == 0
    assert {decode((token,), 9) for token in range(128)} == set(range(9))
    with pytest.raises(ValueError):
        decode((3,), 0)


def test_decode_shuffles_the_choices_per_task():
    maps = {}
    for task_id in TASKS:
        count = len(choices(task_id))
        mapping = tuple(decode((token,), count, task_id) for token in range(count))
        assert sorted(mapping) == list(range(count)), task_id  # every choice reachable, each by one class
        assert all(decode((token + count,), count, task_id) == mapping[token] for token in range(count))
        assert mapping == tuple(decode((token,), count, task_id) for token in range(count))  # fixed
        maps[task_id] = mapping
    assert len(set(maps.values())) == len(TASKS), "one token must name unrelated choices in different tasks"


def test_describe_lists_every_choice():
    text = describe()
    for task_id in TASKS:
        assert f"{task_id}:" in text
        for choice in choices(task_id):
            assert choice.name in text
