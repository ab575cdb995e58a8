"""The split nvcc driver against plain nvcc, both real: same exit status, same messages, same
dependency file, an object with the same symbols; arguments it does not split go to plain nvcc
untouched. What it is not checked on here: running the object (tests/gpu builds every suite
solution through it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cudarl.tester.build import nvcc_split

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")

SOURCES = {
    "ok": "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n"
          "void launch(float* x) { k<<<1, 32>>>(x); }\n",
    "warning": "#include <cuda_runtime.h>\n#warning seen by both preprocessors\n"
               "__global__ void k(float* x) { x[0] = 1.f; }\n",
    "host_error": "#include <cuda_runtime.h>\nvoid f() { this is not C++; }\n"
                  "__global__ void k(float* x) { x[0] = 1.f; }\n",
    "device_error": "#include <cuda_runtime.h>\nint host_only() { return 1; }\n"
                    "__global__ void k(float* x) { x[0] = host_only(); }\n",
}
FLAGS = ["-gencode=arch=compute_90,code=sm_90", "-Xptxas=-v", "-O3", "--compiler-options", "-fPIC"]


def compile_both(tmp_path: Path, name: str, extra: list[str] | None = None) -> tuple[dict, dict]:
    source = tmp_path / f"{name}.cu"
    source.write_text(SOURCES[name])
    results = []
    for label, prefix in (("split", nvcc_split.command(NVCC).split()), ("plain", [NVCC])):
        obj = tmp_path / f"{name}.{label}.o"
        done = subprocess.run([*prefix, "-MD", "-MF", f"{obj}.d", *FLAGS, *(extra or []),
                               "-c", source.name, "-o", obj.name],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)
        results.append({"rc": done.returncode, "out": _steady(done.stdout), "err": _steady(done.stderr), "obj": obj})
    return results[0], results[1]


def _steady(text: str) -> str:
    """Compiler output without the one line that differs run to run (ptxas's own timing)."""
    return re.sub(r"ptxas info\s*: Compile time = [\d.]+ ms\n?", "", text)


def _deps(path: Path) -> list[str]:
    words = path.read_text().replace("\\\n", " ").split()
    return sorted(words[2:])  # "<target> :" first


def _symbols(obj: Path) -> list[str]:
    lines = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines()
    # the static initialiser is named after the intermediate file, which nvcc names at random
    return sorted(line for line in lines if "_GLOBAL__sub_I_" not in line)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_split_matches_plain_nvcc(tmp_path, name):
    before = set(Path(tempfile.gettempdir()).glob("cudarl-nvcc-split-*"))
    split, plain = compile_both(tmp_path, name)
    assert split["rc"] == plain["rc"]
    assert split["out"] == plain["out"]
    assert split["err"] == plain["err"]
    if plain["rc"] == 0:
        assert _deps(Path(f"{split['obj']}.d")) == _deps(Path(f"{plain['obj']}.d"))
        assert _symbols(split["obj"]) == _symbols(plain["obj"])
    assert set(Path(tempfile.gettempdir()).glob("cudarl-nvcc-split-*")) <= before, "intermediate folder left behind"


def test_arguments_it_does_not_split_run_plain_nvcc(tmp_path):
    assert not nvcc_split.splittable(["-E", "x.cu"])
    assert not nvcc_split.splittable(["-c", "x.cu", "-rdc=true"])
    assert not nvcc_split.splittable(["-c", "x.cu", "-gencode=arch=compute_80,code=sm_80",
                                      "-gencode=arch=compute_90,code=sm_90"])
    assert nvcc_split.splittable(["-c", "x.cu", "-o", "x.o", "-gencode=arch=compute_90,code=sm_90"])
    split, plain = compile_both(tmp_path, "ok", ["-gencode=arch=compute_80,code=sm_80"])  # two architectures
    assert split["rc"] == plain["rc"] == 0 and split["err"] == plain["err"]


def test_a_plan_with_an_unknown_step_is_not_split():
    plan = ('#$ _HERE_=/usr/local/cuda/bin\n#$ gcc -E -x c++ -D__CUDA_ARCH__=900 a.cu -o a.cpp1.ii\n'
            '#$ gcc -E -x c++ a.cu -o a.cpp4.ii\n#$ cudafe++ --module_id_file_name "a.id" a.cpp4.ii\n'
            '#$ "$CICC_PATH/cicc" --module_id_file_name "a.id" a.cpp1.ii -o a.ptx\n#$ ptxas a.ptx -o a.cubin\n'
            '#$ fatbinary --create=a.fatbin\n#$ gcc -c -x c++ a.cudafe1.cpp -o a.o\n')
    parsed = nvcc_split.parse_plan(plan)
    assert parsed is not None and [s.kind for s in parsed.steps][-1] == "host-compile"
    assert parsed.environment == ["_HERE_=/usr/local/cuda/bin"]
    assert nvcc_split.parse_plan(plan.replace("#$ ptxas", "#$ nvlink a.o\n#$ ptxas")) is None
    assert nvcc_split.parse_plan(plan.replace("#$ ptxas a.ptx", "#$ ptxas b.ptx\n#$ ptxas a.ptx")) is None
