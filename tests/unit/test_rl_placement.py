"""The RL run's placement plan (``cudarl.rl.placement``): shares packed onto real GPU counts in
creation order, refused with the numbers when they do not pack (the case that would hang)."""

from __future__ import annotations

import pytest

from cudarl.config import CudarlConfig
from cudarl.rl.placement import PlacementError, Slot, plan_placement, run_slots


def _config(**train) -> CudarlConfig:
    return CudarlConfig.model_validate({"train": train, "pool": {"min_bench_workers": 1,
                                                                 "gpus_per_bench_worker": train.pop("bench", 1.0)}})


def test_one_gpu_shared_by_fractions_puts_everyone_on_it():
    slots = run_slots(_config(gpus_per_rank=0.25, bench=0.25))  # the policy defaults to 0.3 beside GPU workers
    plan = plan_placement(slots, [1])
    assert [(s.worker, s.gpus) for s in plan.slots] == [("bench worker 1", 0.25), ("policy", 0.3),
                                                          ("update worker 1", 0.25)]
    assert plan.assignment == ("node 0 gpu 0",) * 3 and plan.gpus_needed == pytest.approx(0.8)
    assert plan.lines()[0] == "placement: 3 workers on 1 node(s) with 1 GPU(s); 0.8 GPU(s) planned"


def test_whole_gpus_over_two_nodes_go_one_worker_per_gpu():
    slots = run_slots(_config(ranks=2, gpus_per_rank=1.0, policy_gpu_share=1.0))
    plan = plan_placement(slots, [2, 2])
    assert plan.assignment == ("node 0 gpu 0", "node 0 gpu 1", "node 1 gpu 0", "node 1 gpu 1")


def test_shares_that_add_up_but_do_not_pack_are_refused_with_the_numbers():
    slots = [Slot("policy", 1, 0.6), Slot("update worker 1", 1, 0.6), Slot("update worker 2", 1, 0.6)]
    with pytest.raises(PlacementError, match=r"update worker 2 needs 0.6 of one GPU.*1.8 GPU\(s\) planned over 2"):
        plan_placement(slots, [2])
    with pytest.raises(PlacementError, match="update worker 3 needs 1 of one GPU"):
        plan_placement(run_slots(_config(ranks=3, gpus_per_rank=1.0, policy_gpu_share=1.0)), [2, 2])


def test_without_gpus_bench_workers_run_without_one_and_a_gpu_policy_is_refused():
    plan = plan_placement(run_slots(_config()), [0])
    assert plan.gpus_needed == 0 and plan.assignment == (None, None, None)
    with pytest.raises(PlacementError, match="policy needs 0.5 of one GPU"):
        plan_placement(run_slots(_config(policy_gpu_share=0.5)), [0, 0])


def test_two_gpus_shared_put_one_update_worker_on_each_and_the_policy_apart_from_the_bench_worker():
    slots = run_slots(_config(ranks=2, gpus_per_rank=0.4, policy_gpu_share=0.6, bench=0.5))
    plan = plan_placement(slots, [2])
    assert plan.assignment == ("node 0 gpu 0", "node 0 gpu 1", "node 0 gpu 1", "node 0 gpu 0")


def test_two_update_workers_on_one_gpu_are_refused():
    with pytest.raises(PlacementError, match="update worker 1 and update worker 2 would share node 0 gpu 0"):
        plan_placement(run_slots(_config(ranks=2, gpus_per_rank=0.25, bench=0.2)), [1])
    with pytest.raises(PlacementError, match="would share node 0 gpu 1"):  # bench + policy on GPU 0 first
        plan_placement(run_slots(_config(ranks=2, gpus_per_rank=0.5, policy_gpu_share=0.5, bench=0.5)), [2])
