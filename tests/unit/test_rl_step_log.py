"""Each RL step's record into the step log (``cudarl.rl.step_log``): the flat scalars by hand, the
JSONL line, TensorBoard events read back with TensorBoard's own reader; the update workers'
resource check (``check_fits``) with its numbers; and which settings a resumed run may change."""

from __future__ import annotations

import json

import pytest

from cudarl.config import CudarlConfig
from cudarl.rl.driver import _check_same_run
from cudarl.rl.group import UpdateWorkersError, check_fits
from cudarl.rl.step_log import StepLog, StepRecord, step_scalars

STATS = {"mean_reward": 0.75, "pass_rate": 0.5, "compile_rate": 1.0, "mean_turns": 2.0, "response_tokens": 96,
         "version_lag": 1, "mean_speedup": 1.5, "median_speedup": None,
         "by_tier": {"easy": {"turns": 4, "pass_rate": 0.5, "compile_rate": 1.0}}}
RECORD = StepRecord(step=3, tier="easy", weights_version=4, stats=STATS, update={"loss": -0.25, "note": "x"},
                    seconds={"rollout": 2.0, "judge": 1.0, "update": 3.0, "sync": 0.5, "step": 6.5},
                    sync_errors={"generator": 1e-5}, overlapped=True, retries=1)


def test_the_scalars_of_a_record():
    assert step_scalars(RECORD, tier_level=0) == {
        "reward/mean": 0.75, "rate/pass": 0.5, "rate/compile": 1.0, "turns/mean": 2.0, "tokens/response": 96.0,
        "version/weights": 4.0, "version/lag": 1.0, "tier/level": 0.0, "retries": 1.0,
        "speedup/mean": 1.5,  # no median: no correct timed turn gave one
        "rate/pass/easy": 0.5, "rate/compile/easy": 1.0,
        "seconds/rollout": 2.0, "seconds/judge": 1.0, "seconds/update": 3.0, "seconds/sync": 0.5,
        "seconds/step": 6.5, "update/loss": -0.25}


def test_the_log_writes_a_json_line_and_tensorboard_events(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = StepLog(tmp_path, ["easy", "medium"], tensorboard=True)
    log.write(RECORD)
    log.write(StepRecord(**{**RECORD.__dict__, "step": 4, "tier": "medium", "stats": STATS | {"mean_reward": 1.0}}))
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [(line["step"], line["overlapped"], line["retries"]) for line in lines] == [(3, True, 1), (4, True, 1)]
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(4, 0.75), (5, 1.0)]
    assert [(e.step, e.value) for e in events.Scalars("tier/level")] == [(4, 0.0), (5, 1.0)]
    assert {"seconds/judge", "rate/pass/easy", "version/lag"} <= set(events.Tags()["scalars"])


def test_update_workers_the_cluster_cannot_hold_are_refused_with_the_numbers():
    check_fits(2, {"CPU": 1.0, "GPU": 0.25}, {"CPU": 2.0, "GPU": 0.5})  # exactly fits
    with pytest.raises(UpdateWorkersError, match=r"need 1 GPU \(4 x 0.25\) but the cluster has 0.5 GPU free"):
        check_fits(4, {"CPU": 0.5, "GPU": 0.25}, {"CPU": 8.0, "GPU": 0.5})
    with pytest.raises(UpdateWorkersError, match=r"need 3 CPU \(3 x 1\) but the cluster has 0 CPU free"):
        check_fits(3, {"CPU": 1.0}, {})


def test_a_resume_may_change_only_the_settings_that_change_nothing_computed(tmp_path):
    path = tmp_path / "config.json"
    config = CudarlConfig().with_changes({"train.steps": 2})
    _check_same_run(path, config, resume=False)
    more = config.with_changes({"train.steps": 4, "train.weight_sync": "object_store", "train.tensorboard": True})
    _check_same_run(path, more, resume=True)  # more steps, another channel, TensorBoard on: the same run
    assert json.loads(path.read_text())["train"]["steps"] == 4  # the settings written are the resumed run's
    with pytest.raises(ValueError, match=r"other settings \(in train\); resume it with the same ones"):
        _check_same_run(path, more.with_changes({"train.learning_rate": 0.5}), resume=True)
    with pytest.raises(ValueError, match=r"other settings \(in algorithm\)"):
        _check_same_run(path, more.with_changes({"algorithm.gamma": 0.1}), resume=True)
