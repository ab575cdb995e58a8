"""nvcc with its host and device front ends run side by side: the same commands, the same output.

Why: for one architecture nvcc runs its steps one after another: preprocess for the device,
preprocess for the host, the host front end (``cudafe++``), the device front end (``cicc``),
``ptxas``, ``fatbinary``, and the host compiler on what ``cudafe++`` wrote. Both front ends
parse every header the source includes (for a torch extension that is most of the build), and
neither needs the other's output: ``cicc`` only reads the module id that ``cudafe++`` writes,
and asked to write it itself it writes the same one (it is derived from the source file). So
the host chain (preprocess, ``cudafe++``) and the device chain (preprocess, ``cicc``, ``ptxas``,
``fatbinary``) run at once, then the host compile; the build of one candidate takes the longer
chain instead of both.

How: ``nvcc --dryrun -keep -keep-dir <private folder>`` prints the exact commands (and the
environment they run in); they are run as printed, with one change: ``cicc`` writes its own copy
of the module id, which must equal ``cudafe++``'s or the build is redone by plain nvcc. The
dependency file (``-MD -MF``) is written from the preprocessed source's line markers, the files
nvcc itself lists. Every command's output is printed in nvcc's order and the exit status is
that of the first failing command in that order, so a failing build reports exactly what
plain nvcc would have (a step after it in nvcc's order that already ran is not shown).

Anything else (several architectures, relocatable device code, ``-E``, an unknown step in the
plan, a command this module does not recognise, any error of the driver itself) runs plain
nvcc. Cost: both front ends hold the parsed headers at once, so a build's peak memory is about
the sum of the two (the memory limit covers the whole group); the intermediate files go to a
private temporary folder, not the build folder. Used as ``PYTORCH_NVCC`` by
``cudarl.tester.build.loading`` (``compile.split_nvcc``); it runs as a script, importing only the
standard library and ``cudarl.env``, so that it adds milliseconds.

    python nvcc_split.py --nvcc /usr/local/cuda/bin/nvcc <nvcc arguments>
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

_ENV_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DEPS_LINE = re.compile(r"^-- Filter Dependencies -- > (.+)$")
_MODULE_ID = re.compile(r'--module_id_file_name ("[^"]+"|\S+)')
_OUTPUT = re.compile(r'\s-o\s+("[^"]+"|\S+)')
_LINE_MARKER = re.compile(rb'^# \d+ "([^"]+)"', re.MULTILINE)
# Arguments that change what nvcc does beyond one object from one source for one architecture.
_NOT_SPLIT = {"-E", "--preprocess", "-M", "-MM", "--dryrun", "-dryrun", "-keep", "--keep", "-rdc=true", "-dc",
              "--device-c", "-dw", "--device-w", "-dlink", "--device-link", "-cubin", "-ptx", "-fatbin",
              "-lto", "-dlto", "--relocatable-device-code=true", "-keep-dir", "--keep-dir", "-time", "--time",
              "-save-temps", "--save-temps", "-cuda", "--cuda", "-odir", "--output-directory"}


@dataclass
class Step:
    """One command of nvcc's plan, in nvcc's order, with what it printed once run."""

    kind: str
    command: str
    returncode: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class Plan:
    environment: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    depfile: str | None = None


def splittable(arguments: list[str]) -> bool:
    """One ``-c`` of one ``.cu`` file, nothing that changes nvcc's pipeline."""
    if "-c" not in arguments and "--compile" not in arguments:
        return False
    if sum(a.endswith(".cu") for a in arguments) != 1:
        return False
    if any(a in _NOT_SPLIT or a.split("=")[0] in {"-rdc", "--relocatable-device-code", "--threads", "-t"}
           for a in arguments):
        return False
    return sum("-gencode" in a or a.startswith(("-arch", "--gpu-architecture")) for a in arguments) <= 1


def _tool(command: str) -> str:
    return shlex.split(command)[0].rsplit("/", 1)[-1] if command.strip() else ""


def _output_file(command: str) -> str:
    return shlex.split(_OUTPUT.search(command).group(1))[0]


def _classify(command: str) -> str | None:
    tool = _tool(command)
    if tool in {"gcc", "g++", "c++", "cc", "clang", "clang++"} or tool.endswith(("-gcc", "-g++")):
        if " -E " in command:
            return "device-preprocess" if "-D__CUDA_ARCH__=" in command else "host-preprocess"
        return "host-compile" if " -c " in command else None
    return {"cudafe++": "host-frontend", "cicc": "device-frontend", "ptxas": "ptxas",
            "fatbinary": "fatbinary"}.get(tool)


def parse_plan(dryrun_output: str) -> Plan | None:
    """nvcc's ``--dryrun`` lines as a plan, or None when a step is not one of the expected."""
    plan = Plan()
    for raw in dryrun_output.splitlines():
        if not raw.startswith("#$ "):
            continue
        line = raw[3:].strip()
        deps = _DEPS_LINE.match(line)
        if deps:
            plan.depfile = deps.group(1).strip().strip('"')
        elif _ENV_LINE.match(line):
            plan.environment.append(line)
        else:
            kind = _classify(line)
            if kind is None:
                return None
            plan.steps.append(Step(kind, line))
    kinds = [s.kind for s in plan.steps]
    expected = {"device-preprocess": 1, "host-preprocess": 1, "host-frontend": 1, "device-frontend": 1,
                "ptxas": 1, "fatbinary": 1, "host-compile": 1}
    if sorted(kinds) != sorted(k for k, n in expected.items() for _ in range(n)) or kinds[-1] != "host-compile":
        return None
    return plan


def _module_id_path(command: str) -> str | None:
    found = _MODULE_ID.search(command)
    return shlex.split(found.group(1))[0] if found else None


class _Runner:
    """Runs chains of a plan; a failure in the host chain stops the device chain (whose later
    steps nvcc would never have reached), one in the device chain lets the host chain finish
    (nvcc runs ``cudafe++`` first, so its output comes first)."""

    def __init__(self, plan: Plan, cwd: str) -> None:
        self.plan, self.cwd = plan, cwd
        from cudarl.env import child_environment

        # nvcc's tools get what nvcc gives them: this environment and the plan's settings.
        self.environment = child_environment({
            name: " ".join(shlex.split(value)) if value.strip() else ""  # the value in the shell's quoting
            for name, value in (line.split("=", 1) for line in plan.environment)})
        self.host_failed = threading.Event()
        self.lock = threading.Lock()
        self.device_process: subprocess.Popen | None = None
        self.error: Exception | None = None

    def run(self, kinds: tuple[str, ...], device: bool = False) -> None:
        try:
            self._run(kinds, device)
        except Exception as exc:  # noqa: BLE001 - recorded; the driver then runs plain nvcc
            self.error = exc

    def _run(self, kinds: tuple[str, ...], device: bool) -> None:
        for step in self.plan.steps:
            if step.kind not in kinds:
                continue
            with self.lock:
                if device and self.host_failed.is_set():
                    return
                process = subprocess.Popen(["/bin/sh", "-c", step.command], cwd=self.cwd, env=self.environment,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if device:
                    self.device_process = process if step.kind != "device-preprocess" else None
            out, err = process.communicate()
            if device and self.host_failed.is_set() and step.kind != "device-preprocess":
                return  # stopped: nvcc would not have run it
            step.returncode, step.stdout, step.stderr = process.returncode, out, err
            if process.returncode != 0:
                if not device:
                    with self.lock:
                        self.host_failed.set()
                        if self.device_process is not None and self.device_process.poll() is None:
                            self.device_process.kill()
                return


def _write_depfile(depfile: str, target: str, source: str, preprocessed: list[str]) -> None:
    """What nvcc writes for ``-MD``: the object, then every file either preprocessor read."""
    seen: dict[str, None] = {}
    for path in preprocessed:
        with open(path, "rb") as handle:
            seen.update(dict.fromkeys(m.group(1).decode(errors="replace")
                                      for m in _LINE_MARKER.finditer(handle.read())))
    files = [source] + [f for f in seen if not f.startswith("<") and f != source]
    escaped = [f.replace(" ", "\\ ") for f in files]
    with open(depfile, "w") as handle:
        handle.write(f"{target} : " + " \\\n    ".join(escaped) + "\n")


def _emit(stream, data: bytes) -> None:
    """Write and flush at once, so that stdout and stderr interleave in nvcc's order."""
    if data:
        stream.flush()
        stream.buffer.write(data)
        stream.buffer.flush()


def _show(plan: Plan, dry: subprocess.CompletedProcess) -> int | None:
    """Print what nvcc would have printed, in its order, up to the first failing step; that
    step's status (None when a step that should have run did not: plain nvcc decides)."""
    shown: list[Step] = []
    for step in plan.steps:
        if step.returncode is None:
            return None
        shown.append(step)
        if step.returncode != 0:
            break
    _emit(sys.stdout, dry.stdout.encode())
    _emit(sys.stderr, "".join(line + "\n" for line in dry.stderr.splitlines() if not line.startswith("#$ ")).encode())
    for step in shown:
        _emit(sys.stdout, step.stdout)
        _emit(sys.stderr, step.stderr)
        if step.returncode < 0:  # what nvcc says when a tool dies
            _emit(sys.stderr,
                  f"nvcc error   : '{_tool(step.command)}' died due to signal {-step.returncode}\n".encode())
            return 1
    return shown[-1].returncode


def run_split(nvcc: str, arguments: list[str]) -> int | None:
    """Build with the two chains side by side; the exit status, or None to run plain nvcc."""
    cwd = os.getcwd()
    keep = tempfile.mkdtemp(prefix="cudarl-nvcc-split-")  # outside the build folder, which is an artifact
    try:
        dry = subprocess.run([nvcc, "--dryrun", "-keep", "-keep-dir", keep, *arguments], capture_output=True, text=True)
        plan = parse_plan(dry.stderr) if dry.returncode == 0 else None
        if plan is None:
            return None
        cicc = next(s for s in plan.steps if s.kind == "device-frontend")
        cudafe = next(s for s in plan.steps if s.kind == "host-frontend")
        module_id = _module_id_path(cicc.command)
        if module_id is None or "--gen_module_id_file" in cicc.command or module_id != _module_id_path(cudafe.command):
            return None
        own_id = module_id + ".device"
        cicc.command = cicc.command.replace(_MODULE_ID.search(cicc.command).group(0),
                                            f"--gen_module_id_file --module_id_file_name {shlex.quote(own_id)}")
        runner = _Runner(plan, cwd)
        chains = [threading.Thread(target=runner.run, args=(("host-preprocess", "host-frontend"),)),
                  threading.Thread(target=runner.run, args=(("device-preprocess", "device-frontend", "ptxas",
                                                              "fatbinary"), True))]
        for chain in chains:
            chain.start()
        for chain in chains:
            chain.join()
        if runner.error is not None:
            return None
        front_ok = all(s.returncode == 0 for s in plan.steps if s.kind != "host-compile")
        if front_ok:
            with open(module_id, "rb") as a, open(own_id, "rb") as b:
                if a.read() != b.read():
                    return None  # never seen; plain nvcc keeps the build correct
            if plan.depfile:
                target = (arguments[arguments.index("-o") + 1] if "-o" in arguments
                          else _output_file(plan.steps[-1].command))
                source = next(a for a in arguments if a.endswith(".cu"))
                preprocessed = [_output_file(s.command) for s in plan.steps if s.kind.endswith("preprocess")]
                _write_depfile(plan.depfile, target, source, preprocessed)
            runner.run(("host-compile",))
            if runner.error is not None:
                return None
        return _show(plan, dry)
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def command(nvcc: str) -> str:
    """The shell command that runs this driver in front of ``nvcc`` (for ``PYTORCH_NVCC``):
    this Python, isolated and without site packages, on this file."""
    return " ".join(shlex.quote(part)
                    for part in (sys.executable, "-I", "-S", os.path.abspath(__file__), "--nvcc", nvcc))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--nvcc":
        sys.stderr.write("usage: nvcc_split.py --nvcc PATH <nvcc arguments>\n")
        return 2
    nvcc, arguments = argv[1], argv[2:]
    try:
        status = run_split(nvcc, arguments) if splittable(arguments) else None
    except Exception:  # noqa: BLE001 - nothing was printed yet; plain nvcc gives the real result
        status = None
    sys.stdout.flush()
    sys.stderr.flush()
    if status is None:
        os.execv(nvcc, [nvcc, *arguments])
    return status


if __name__ == "__main__":
    # Run as a script (``python -I -S``): the project is not on sys.path; ``cudarl.env`` is.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    sys.exit(main(sys.argv[1:]))
