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


def _numeric_fields(model: type, prefix: str = ""):
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _numeric_fields(annotation, f"{prefix}{name}.")
        elif annotation in (int, float, int | None, float | None):
            yield f"{prefix}{name}", field


def test_every_numeric_setting_is_bounded_below():
    """A setting with no bound validates nonsense (a negative timeout blames honest candidates
    with ``timeout``); ``curriculum.seed`` is the one number any value of is fine."""
    unbounded = [path for path, field in _numeric_fields(CudarlConfig) if path != "curriculum.seed"
                 and not any(hasattr(rule, "ge") or hasattr(rule, "gt") for rule in field.metadata)]
    assert not unbounded, unbounded
    assert len(list(_numeric_fields(CudarlConfig))) > 40  # the walk reached every section


@pytest.mark.parametrize("setting, value, named", [
    ("tester.sandbox.timeout_s", -5, "greater than 0"),
    ("curriculum.window", 0, "greater than or equal to 1"),
    ("curriculum.replay_fraction", 1.5, "less than or equal to 1"),
    ("tester.sandbox.gpu_memory_fraction", 0, "greater than 0"),
    ("tester.correctness.trials", 0, "greater than or equal to 1"),
    ("tester.hardening.side_stream_share", 2, "less than or equal to 1"),
    ("tester.compile.fallback_arch", "ninety", "pattern"),
    ("pool.bench_slots", 0, "greater than or equal to 1"),
])
def test_out_of_range_settings_are_refused_naming_the_setting(tmp_path, setting, value, named):
    *section, leaf = setting.split(".")
    path = tmp_path / "bad.toml"
    path.write_text(f"[{'.'.join(section)}]\n{leaf} = {value!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")) as refused:
        load_config(path)
    assert named in str(refused.value)


def test_settings_that_contradict_each_other_are_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[tester.timing]\nmin_runs = 50\nmax_runs = 10\n")
    with pytest.raises(ConfigError, match="min_runs \\(50\\) is above max_runs \\(10\\)"):
        load_config(path)
    path.write_text("[curriculum]\ntiers = ['easy', 'easy']\n")
    with pytest.raises(ConfigError, match="tiers repeat a name"):
        load_config(path)
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)
