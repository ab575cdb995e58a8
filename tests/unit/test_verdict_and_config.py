"""Verdict serialization and config loading."""

import tomllib

import pytest

from cudarl.config import ConfigError, CudarlConfig, describe_defaults, load_config
from cudarl.tester.judging.timing import summarize
from cudarl.tester.verdict import (
    CompileReport,
    CorrectnessReport,
    KernelResources,
    Outcome,
    Stage,
    TimingReport,
    TrialFailure,
    Verdict,
)


def full_verdict() -> Verdict:
    stats = summarize([1.0, 1.1, 0.9, 1.0])
    return Verdict(
        task_id="t", candidate_id="c", candidate_hash="h", stage=Stage.DONE, outcome=Outcome.PASSED,
        compile=CompileReport(mode="kernel", arch="sm_90", cache_key="k", cached=False, seconds=1.5,
                              kernels=[KernelResources(name="k(float*)", mangled_name="_Z1kPf", arch="sm_90",
                                                       registers=12, shared_memory_bytes=1024)]),
        correctness=CorrectnessReport(trials_run=5, trials_passed=4, atol=1e-4, rtol=1e-4, max_abs_error=0.5,
                                      first_failure=TrialFailure(trial=4, reason="x")),
        timing=TimingReport(candidate=stats, reference=stats, speedup=1.0, l2_flush_bytes=1 << 20, device="gpu"),
        stage_seconds={"compile": 1.5},
    )


def test_verdict_round_trips_through_json():
    verdict = full_verdict()
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict and again.correct and again.speedup == 1.0


def test_summarize_reports_median_spread_and_relative_standard_error():
    stats = summarize([1.0, 2.0, 3.0])
    assert stats.median_ms == 2.0 and stats.count == 3 and stats.stdev_ms == pytest.approx(1.0)
    assert stats.rse == pytest.approx((1.0 / 3 ** 0.5) / 2.0)


def test_config_loads_toml_and_rejects_unknown_keys(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("[tester.sandbox]\ntimeout_s = 12.5\n")
    assert load_config(good).tester.sandbox.timeout_s == 12.5
    bad = tmp_path / "bad.toml"
    bad.write_text("[tester.sandbox]\ntimeout = 12\n")
    with pytest.raises(ConfigError, match="tester.sandbox.timeout"):
        load_config(bad)
    wrong_type = tmp_path / "wrong.toml"
    wrong_type.write_text("[tester.compile]\nmode = 'fastest'\n")
    with pytest.raises(ConfigError, match="tester.compile.mode"):
        load_config(wrong_type)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_described_defaults_are_valid_toml_that_loads_back_to_the_defaults():
    text = describe_defaults(CudarlConfig())
    assert CudarlConfig.model_validate(tomllib.loads(text)) == CudarlConfig()
    assert "# Wall-clock limit for running one candidate" in text
