"""Pool decisions and build artifacts, without Ray or a GPU.

Covered: ``scaling.scale_target`` (up on queue depth, first worker, steady, down on idleness only
when nothing waits, clamps), ``compile_bounds`` and ``bench_bounds`` (automatic maxima, low above
high); ``artifact.pack_artifact``/``install_artifact`` on a hand-built cache entry (regular files
only, byte-identical install with a usable report, idempotent install, damaged and escaping
archives refused without leftovers) and ``judgement_key`` (ids ignored; source, reference and
hidden shapes counted).
"""

import hashlib
import io
import os
import tarfile

import pytest

from cudarl.pool.records import judgement_key
from cudarl.pool.scaling import Bounds, KindLoad, bench_bounds, compile_bounds, pool_targets, scale_target
from cudarl.tasks.candidate import Candidate
from cudarl.tasks.task import Task
from cudarl.tester.build.artifact import ArtifactError, install_artifact, pack_artifact
from cudarl.tester.build.compile import CompileCache
from cudarl.tester.verdict import CompileReport, Outcome, Stage, Verdict

KEY = "0123456789abcdef0123456789abcdef"
LIB_BYTES = bytes(range(256)) * 40 + b"\x00tail"


# --- scaling ---------------------------------------------------------------------------------

def test_scale_up_drains_queue_at_per_worker_depth_and_caps_at_high():
    load = KindLoad(workers=2, busy=2, queued=10)
    assert scale_target(load, Bounds(0, 16), per_worker_depth=2, idle_s=60) == 2 + 5
    assert scale_target(load, Bounds(0, 4), per_worker_depth=2, idle_s=60) == 4
    # just over the depth still adds at least one worker
    assert scale_target(KindLoad(workers=3, busy=0, queued=7), Bounds(0, 16), 2, 60) == 4


def test_first_worker_starts_when_queue_is_not_empty():
    assert scale_target(KindLoad(workers=0, busy=0, queued=1), Bounds(0, 8), 4, 60) == 1
    assert scale_target(KindLoad(workers=0, busy=0, queued=9), Bounds(0, 8), 4, 60) == 3
    assert scale_target(KindLoad(workers=0, busy=0, queued=0), Bounds(0, 8), 4, 60) == 0


def test_queue_within_depth_changes_nothing_even_with_long_idle_workers():
    load = KindLoad(workers=3, busy=2, queued=6, idle_seconds=(999.0,))
    assert scale_target(load, Bounds(0, 8), per_worker_depth=2, idle_s=60) == 3


def test_scale_down_only_workers_idle_long_enough_and_never_below_low():
    load = KindLoad(workers=5, busy=2, queued=0, idle_seconds=(10.0, 60.0, 300.0))
    assert scale_target(load, Bounds(0, 8), 2, idle_s=60) == 3
    assert scale_target(load, Bounds(4, 8), 2, idle_s=60) == 4
    all_idle = KindLoad(workers=3, busy=0, queued=0, idle_seconds=(100.0, 100.0, 100.0))
    assert scale_target(all_idle, Bounds(1, 8), 2, idle_s=60) == 1
    busy = KindLoad(workers=3, busy=3, queued=0)
    assert scale_target(busy, Bounds(0, 8), 2, idle_s=60) == 3


def test_target_is_clamped_into_bounds():
    assert scale_target(KindLoad(workers=0, busy=0, queued=0), Bounds(2, 8), 2, 60) == 2
    assert scale_target(KindLoad(workers=10, busy=10, queued=0), Bounds(0, 8), 2, 60) == 8
    assert Bounds(2, 5).clamp(-3) == 2 and Bounds(2, 5).clamp(3) == 3 and Bounds(2, 5).clamp(9) == 5


def test_compile_bounds_automatic_high_from_cpus_left_after_bench_workers():
    assert compile_bounds(0, 0, cluster_cpus=16, bench_cpus=4, worker_cpus=2) == Bounds(0, 6)
    assert compile_bounds(1, 0, cluster_cpus=16, bench_cpus=3, worker_cpus=4) == Bounds(1, 3)
    assert compile_bounds(0, 0, cluster_cpus=2, bench_cpus=4, worker_cpus=1) == Bounds(0, 1)
    assert compile_bounds(0, 5, cluster_cpus=64, bench_cpus=0, worker_cpus=1) == Bounds(0, 5)
    assert compile_bounds(9, 0, cluster_cpus=8, bench_cpus=0, worker_cpus=2) == Bounds(4, 4)


def test_compile_workers_hold_still_until_a_bench_worker_says_what_to_build_for():
    idle_bench = KindLoad(workers=0, busy=0, queued=0)
    builds_waiting = KindLoad(workers=0, busy=0, queued=5)
    # waiting for the profile: no compile worker starts, a bench worker does (builds are waiting)
    assert pool_targets(idle_bench, builds_waiting, Bounds(0, 1), Bounds(1, 4), 2, 60, True) == (1, 0)
    # existing compile workers are neither added to nor removed
    three = KindLoad(workers=3, busy=0, queued=9, idle_seconds=(99.0, 99.0, 99.0))
    assert pool_targets(idle_bench, three, Bounds(0, 1), Bounds(0, 8), 2, 60, True) == (1, 3)
    # once it is known, both kinds scale on their own load
    assert pool_targets(idle_bench, builds_waiting, Bounds(0, 1), Bounds(1, 4), 2, 60, False) == (0, 3)


def test_bench_bounds_automatic_high_from_gpus_or_without_gpu():
    assert bench_bounds(0, 0, cluster_gpus=2, gpus_per_worker=0.5, without_gpu=1) == Bounds(0, 4)
    assert bench_bounds(0, 0, cluster_gpus=3, gpus_per_worker=1 / 3, without_gpu=1) == Bounds(0, 9)
    assert bench_bounds(0, 0, cluster_gpus=0, gpus_per_worker=1, without_gpu=2) == Bounds(0, 2)
    assert bench_bounds(0, 3, cluster_gpus=8, gpus_per_worker=1, without_gpu=1) == Bounds(0, 3)
    assert bench_bounds(6, 0, cluster_gpus=2, gpus_per_worker=1, without_gpu=1) == Bounds(2, 2)


def test_bench_bounds_counts_decimal_gpu_shares_exactly():
    # 1 // 0.1 == 9.0 in floating point: the tolerance must apply before flooring
    assert bench_bounds(0, 0, cluster_gpus=1, gpus_per_worker=0.1, without_gpu=1) == Bounds(0, 10)
    assert bench_bounds(0, 0, cluster_gpus=1, gpus_per_worker=0.2, without_gpu=1) == Bounds(0, 5)


# --- artifacts -------------------------------------------------------------------------------

def make_entry(cache: CompileCache) -> dict[str, bytes]:
    entry = cache.entry(KEY)
    (entry / "build" / "ext").mkdir(parents=True)
    files = {"build/ext/lib.so": LIB_BYTES, "cudarl-artifact.json": b'{"kernels": ["k"]}'}
    for name, data in files.items():
        (entry / name).write_bytes(data)
    (entry / "build" / "ext" / "x.o").write_bytes(b"object")
    (entry / "build" / "ext" / "ext.lock").write_bytes(b"")
    os.symlink("/etc/passwd", entry / "build" / "passwd")
    return files


def verdict(key: str = KEY) -> Verdict:
    report = CompileReport(mode="extension", arch="sm_90", cache_key=key, cached=False, seconds=2.5)
    return Verdict(task_id="t", candidate_id="c", candidate_hash="h", stage=Stage.COMPILE,
                   outcome=Outcome.COMPILED, compile=report)


def tar_with(name: str, data: bytes = b"evil") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def leftovers(cache: CompileCache) -> list[str]:
    return sorted(p.name for p in cache.root.iterdir() if p.is_dir())


def test_pack_keeps_regular_files_and_leaves_out_objects_locks_and_links(tmp_path):
    files = make_entry(CompileCache(tmp_path / "a"))
    data = pack_artifact(CompileCache(tmp_path / "a").entry(KEY))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert sorted(members) == sorted(files)
        assert all(m.isfile() for m in members.values())
        assert archive.extractfile("build/ext/lib.so").read() == LIB_BYTES


def test_install_recreates_files_and_report_and_second_install_is_a_no_op(tmp_path):
    source = CompileCache(tmp_path / "a")
    files = make_entry(source)
    data = pack_artifact(source.entry(KEY))
    target = CompileCache(tmp_path / "b")
    install_artifact(target, KEY, data, verdict().compile)
    for name, content in files.items():
        assert (target.entry(KEY) / name).read_bytes() == content
    assert not (target.entry(KEY) / "build" / "ext" / "x.o").exists()
    assert not (target.entry(KEY) / "build" / "passwd").exists()
    found = target.lookup(KEY)
    assert found is not None and found.ok
    assert found.report.cache_key == KEY and found.report.mode == "extension" and found.report.seconds == 2.5
    assert leftovers(target) == [KEY]
    install_artifact(target, KEY, b"not a tar" * 100, verdict().compile)  # already installed: not even read
    assert (target.entry(KEY) / "build/ext/lib.so").read_bytes() == LIB_BYTES
    assert target.lookup(KEY).ok and leftovers(target) == [KEY]


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_artifact_raises_and_leaves_nothing_behind(tmp_path, damage):
    source = CompileCache(tmp_path / "a")
    make_entry(source)
    data = pack_artifact(source.entry(KEY))
    bad = b"not a tar" * 100 if damage == "garbage" else data[:512 * 3 + 100]  # cut inside lib.so
    target = CompileCache(tmp_path / "b")
    with pytest.raises(ArtifactError):
        install_artifact(target, KEY, bad, verdict().compile)
    assert leftovers(target) == []
    assert target.lookup(KEY) is None


def test_artifact_cut_at_a_member_boundary_is_refused(tmp_path):
    source = CompileCache(tmp_path / "a")
    make_entry(source)
    data = pack_artifact(source.entry(KEY))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        cut = archive.getmembers()[1].offset  # lib.so whole, cudarl-artifact.json and the end marker gone
    target = CompileCache(tmp_path / "b")
    with pytest.raises(ArtifactError):
        install_artifact(target, KEY, data[:cut], verdict().compile, hashlib.sha256(data).hexdigest())
    assert target.lookup(KEY) is None


@pytest.mark.parametrize("name", ["../escaped.txt", "build/../../escaped.txt"])
def test_escaping_member_is_refused_and_writes_nothing_outside(tmp_path, name):
    target = CompileCache(tmp_path / "cache" / "b")
    with pytest.raises(ArtifactError):
        install_artifact(target, KEY, tar_with(name), verdict().compile)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert leftovers(target) == [] and target.lookup(KEY) is None


def test_absolute_member_is_kept_inside_the_entry(tmp_path):
    # tarfile's data filter strips the leading slash rather than refusing the member
    outside = tmp_path / "outside.txt"
    target = CompileCache(tmp_path / "b")
    install_artifact(target, KEY, tar_with(str(outside)), verdict().compile)
    assert not outside.exists()
    inside = target.entry(KEY) / str(outside).lstrip("/")
    assert inside.read_bytes() == b"evil"


# --- judgement keys --------------------------------------------------------------------------

def test_judgement_key_ignores_candidate_id_but_not_sources_or_hidden_shapes():
    task = Task(id="t1", source="class Model: pass\n", hidden={"N": 7})
    first = Candidate(task_id="t1", id="a", source="x = 1\n")
    key = judgement_key(task, first)
    assert judgement_key(task, Candidate(task_id="t1", id="b", source="x = 1\n")) == key
    assert judgement_key(task, Candidate(task_id="t1", id="a", source="x = 2\n")) != key
    assert judgement_key(task.model_copy(update={"source": "class Model: pass  \n"}), first) != key
    assert judgement_key(Task(id="t1", source=task.source, hidden={"N": 8}), first) != key
    assert judgement_key(Task(id="t1", source=task.source), first) != key


def test_compile_workers_build_for_the_bench_workers_gpu():
    from cudarl.config import TesterConfig
    from cudarl.pool.records import CompileProfile, builder_config

    base = TesterConfig()
    built = builder_config(base, CompileProfile("extension", "90"))
    assert (built.compile.mode, built.compile.arch) == ("extension", "90")
    assert (base.compile.mode, base.compile.arch) == ("auto", None)  # the pool's own config is untouched
    assert built.compile.timeout_s == base.compile.timeout_s and builder_config(base, None) is base
