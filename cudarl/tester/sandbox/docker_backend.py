"""The Docker sandbox backend (``tester.sandbox.backend = "docker"``): a sandboxed child (the
compile child) run in a container instead of a plain child process, through the ``docker``
Python package.

The container: no network, a read-only root, the folders the job may write (the candidate's and
its build folder) as the only writable mounts besides a private ``/tmp``, memory (swap included),
PID and CPU limits from the config, every capability dropped, no privilege gain, never root
(the caller's uid, or nobody when the tester runs as root). The image is built here
(``ensure_image``): an almost empty root imported with ``docker import`` (no registry needed),
with the host's system folders, Python, the project's environment and the CUDA toolkit
bind-mounted read-only at their own paths, so the child runs the same interpreter and compilers
as the namespace backend and its verdicts match.

The child speaks the same protocol as under the namespace backend: its job on stdin (attached
before start, closed after the job: never argv or the environment), stdout and stderr (kept up
to the output limit; the container's log is capped too), and JSON-line messages over a Unix
socket in a private folder mounted into the container (a pipe's descriptor cannot cross into a
container); the parent checks signatures as before. The watchdog reads the container's cgroup
for its process count; the kernel enforces memory (an OOM kill is reported as the memory limit)
and the PID limit.

Covered: the compile child. Not covered: the judge and runner (they need the GPU inside the
container: the NVIDIA container toolkit, ``--gpus``; not done), warm children (every job starts
a container), cgroup v2 process counts (the PID limit still holds there).
"""

from __future__ import annotations

import io
import os
import socket
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from cudarl import env
from cudarl.tester.sandbox.parent import ChildLimits, ChildOutcome, _MessageReader, child_limits, time_exceeded

IMAGE = "cudarl-sandbox:1"
"""The local image's name (``image_name`` adds the host layout): an almost empty root; everything
it runs is bind-mounted."""
_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc")
_POLL_S = 0.1


class DockerUnavailable(RuntimeError):
    """No Docker engine reachable, or the ``docker`` package missing."""


def client():
    """A client of the local Docker engine; ``DockerUnavailable`` with the reason otherwise."""
    try:
        import docker
    except ImportError as exc:
        raise DockerUnavailable("tester.sandbox.backend = 'docker' needs the docker package "
                                "(pip install cudarl[docker])") from exc
    try:
        engine = docker.from_env(timeout=60)
        engine.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine, said in one line
        raise DockerUnavailable(f"no Docker engine reachable ({type(exc).__name__}: {exc}); start dockerd "
                                "or use tester.sandbox.backend = 'namespace'") from exc
    return engine


def _root_links() -> dict[str, str]:
    """The host's system folders that are links (``/lib64 -> usr/lib64`` on a merged-/usr system):
    the image repeats them, so that the dynamic loader's path resolves inside the container."""
    return {path.lstrip("/"): os.readlink(path) for path in _SYSTEM if Path(path).is_symlink()}


def image_name() -> str:
    """The image for this host's layout (its links are in its tag)."""
    import hashlib

    digest = hashlib.sha256(repr(sorted(_root_links().items())).encode()).hexdigest()[:12]
    return f"{IMAGE}-{digest}"


def ensure_image(engine) -> str:
    """The local image (``image_name``), imported from an almost empty root the first time (mount
    points and the host's system links; no registry involved)."""
    import docker.errors

    name = image_name()
    try:
        engine.images.get(name)
        return name
    except docker.errors.ImageNotFound:
        pass
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as root:
        for folder in ("tmp", "proc", "dev", "sys"):
            entry = tarfile.TarInfo(folder)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            root.addfile(entry)
        for link, target in _root_links().items():
            entry = tarfile.TarInfo(link)
            entry.type, entry.linkname = tarfile.SYMTYPE, target
            root.addfile(entry)
    repository, tag = name.split(":")
    engine.api.import_image_from_data(buffer.getvalue(), repository=repository, tag=tag)
    return name


def read_only_mounts() -> list[str]:
    """The host folders the child needs, read-only at their own paths: system folders, Python
    (the interpreter's install and the environment), the project's package and the toolkit."""
    from cudarl import _compat
    from cudarl.tester.sandbox.parent import _package_root

    folders = [Path(p) for p in _SYSTEM if Path(p).is_dir() and not Path(p).is_symlink()]
    folders += [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(_package_root())]
    folders += [Path(sys.executable).resolve().parent.parent]
    toolkit = _compat.cuda_home()
    if toolkit is not None:
        folders.append(toolkit.resolve())
    kept: list[Path] = []
    for folder in sorted(set(folders), key=lambda p: len(p.parts)):
        if not any(folder.is_relative_to(parent) for parent in kept):
            kept.append(folder)
    return [str(folder) for folder in kept]


class _SocketMessages(_MessageReader):
    """The parent's end of the message socket: the first connection's lines (then as a pipe)."""

    def __init__(self, listener: socket.socket, key: bytes | None, timeout_s: float) -> None:
        super().__init__(-1, key)
        self.listener, self.timeout_s = listener, timeout_s

    def run(self) -> None:
        self.listener.settimeout(self.timeout_s)
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return  # the child never connected (it died first); its exit status tells why
        self.fd = os.dup(connection.fileno())
        connection.close()
        super().run()


def _cgroup_pids(container_id: str) -> int | None:
    """Processes in the container now (cgroup v1's pids controller), or None where unreadable."""
    for path in (f"/sys/fs/cgroup/pids/docker/{container_id}/pids.current",
                 f"/sys/fs/cgroup/pids/system.slice/docker-{container_id}.scope/pids.current"):
        try:
            return int(Path(path).read_text())
        except (OSError, ValueError):
            continue
    return None


NOBODY = "65534:65534"
"""The container's user when the tester runs as root (root inside a container is still root on
the host's files it can reach)."""


def container_user(writable: tuple[Path, ...]) -> str:
    """The caller's uid, or ``NOBODY`` for root, with the writable folders opened to it."""
    if os.getuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    for folder in writable:
        os.chmod(folder, 0o777)  # the build's own folders, made for this build
    return NOBODY


def run_in_container(module: str, job: dict, limits: ChildLimits, cwd: Path | None, key: bytes | None,
                     writable: tuple[Path, ...], readable: tuple[Path, ...] = ()) -> ChildOutcome:
    """``python -P -m module`` in a container with ``job`` on its stdin; as ``run_child``, never
    raises for the child's faults (an unreachable engine raises ``DockerUnavailable``).
    ``writable``: the folders it may write; ``readable``: more it may read (the tester's
    precompiled header)."""
    engine = client()
    image = ensure_image(engine)
    job = {**job, "limits": {**child_limits(limits), "isolate_network": False, "isolate_pids": False}}
    if key is not None:
        job["key"] = key.hex()
    channel_dir = Path(tempfile.mkdtemp(prefix="cudarl-docker-"))
    os.chmod(channel_dir, 0o755)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    socket_path = channel_dir / "messages.sock"
    listener.bind(str(socket_path))
    os.chmod(socket_path, 0o666)
    listener.listen(1)
    mounts = {path: {"bind": path, "mode": "ro"} for path in read_only_mounts()}
    mounts |= {str(Path(p).resolve()): {"bind": str(Path(p).resolve()), "mode": "ro"} for p in readable
               if Path(p).is_dir()}
    mounts |= {str(Path(p).resolve()): {"bind": str(Path(p).resolve()), "mode": "rw"} for p in writable}
    mounts[str(channel_dir)] = {"bind": str(channel_dir), "mode": "rw"}
    pythonpath = os.pathsep.join(p for p in (_package_path(), env.get(env.PYTHONPATH)) if p)
    name = f"cudarl-{uuid.uuid4().hex[:12]}"
    host = engine.api.create_host_config(
        binds=mounts, network_mode="none", read_only=True,
        tmpfs={"/tmp": f"rw,exec,nosuid,size={max(limits.file_size_limit_mb * 4, 256)}m"},
        mem_limit=f"{limits.memory_limit_mb}m", memswap_limit=f"{limits.memory_limit_mb}m",
        pids_limit=limits.max_processes, nano_cpus=int(_cpus() * 1e9), cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        log_config={"type": "json-file", "config": {"max-size": f"{max(limits.output_limit_bytes * 4, 65536)}"}})
    # the low-level call with detach=False sets StdinOnce: closing the attached stdin closes the child's
    created = engine.api.create_container(
        image, [sys.executable, "-P", "-m", module, "--result-socket", str(socket_path)], name=name,
        stdin_open=True, detach=False, user=container_user(writable), host_config=host,
        working_dir=str(cwd) if cwd is not None else "/tmp", network_disabled=True,
        environment={**_child_environment(), env.PYTHONPATH: pythonpath, "HOME": "/tmp"},
        volumes=list(mounts))
    container = engine.containers.get(created["Id"])
    messages = _SocketMessages(listener, key, timeout_s=limits.timeout_s + 30)
    messages.start()
    try:
        return _watch(engine, container, job, limits, messages)
    finally:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        listener.close()
        for leftover in channel_dir.iterdir():
            leftover.unlink(missing_ok=True)
        channel_dir.rmdir()


def _watch(engine, container, job: dict, limits: ChildLimits, messages: _SocketMessages) -> ChildOutcome:
    import json

    stdin = container.attach_socket(params={"stdin": 1, "stream": 1})
    container.start()
    started_at = time.monotonic()
    raw = getattr(stdin, "_sock", stdin)
    try:
        raw.sendall(json.dumps(job).encode())
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the child died before reading its job; its exit status tells why
    finally:
        raw.close()
    timed_out = processes_exceeded = turn_wait_exceeded = False
    while True:
        container.reload()
        if container.status not in ("created", "running"):
            break
        late = time_exceeded(messages, limits, started_at)
        if late:
            turn_wait_exceeded, timed_out = late == "turn_wait", late == "timeout"
            break
        pids = _cgroup_pids(container.id)
        if pids is not None and pids >= limits.max_processes:
            processes_exceeded = True
            break
        time.sleep(_POLL_S)
    if container.status in ("created", "running"):
        container.kill()
    state = container.wait(timeout=60)
    container.reload()
    wall = time.monotonic() - started_at
    messages.join(timeout=5)
    oom = bool(container.attrs["State"].get("OOMKilled"))
    code = state.get("StatusCode")
    killed = timed_out or processes_exceeded or turn_wait_exceeded or oom or (code is not None and code >= 128)
    stdout, out_cut = _bounded(container.logs(stdout=True, stderr=False), limits.output_limit_bytes)
    stderr, err_cut = _bounded(container.logs(stdout=False, stderr=True), limits.output_limit_bytes)
    return ChildOutcome(exit_code=None if killed else code, signal_name="SIGKILL" if killed else None,
                        timed_out=timed_out, memory_exceeded=oom, wall_s=wall, stdout=stdout, stderr=stderr,
                        output_truncated=out_cut or err_cut, messages=list(messages.messages),
                        forged_messages=messages.forged, processes_exceeded=processes_exceeded,
                        turn_wait_exceeded=turn_wait_exceeded)


def _bounded(data: bytes, limit: int) -> tuple[str, bool]:
    text = data[:limit].decode(errors="replace")
    return (text + f"\n[... {len(data) - limit} more bytes dropped]", True) if len(data) > limit else (text, False)


def _package_path() -> str:
    from cudarl.tester.sandbox.parent import _package_root

    return _package_root()


def _child_environment() -> dict[str, str]:
    """The variables the child needs from the parent's environment (not the whole of it: the
    container gets only what the build uses)."""
    wanted = (env.CUDARL_CACHE_DIR, env.CUDARL_CUDA_ARCH, env.CUDARL_NVRTC_DIR, env.CUDA_HOME, env.TORCH_CUDA_ARCH_LIST,
              env.MAX_JOBS, env.PYTORCH_NVCC, "PATH", "LANG")
    return {name: value for name in wanted if (value := env.get(name)) is not None}


def _cpus() -> float:
    """CPUs a container may use: the tester's build jobs' worth, at least one."""
    return float(max(1, int(env.get(env.MAX_JOBS) or 0) or min(4, os.cpu_count() or 1)))

