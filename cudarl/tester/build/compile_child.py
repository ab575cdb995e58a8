"""The compile child: ``python -m cudarl.tester.build.compile_child --result-fd N``, job on stdin.

Its one job, ``compile``, imports the candidate with ``load_inline`` steered to the tester's build
directory, which builds its extensions (stage 2, extension mode). The candidate's module-level
code runs here, so the child applies the same limits as the runner (no network, file size,
adopting and killing every process it started). Messages go to the result pipe as JSON lines:
``hello``, ``stage``, ``result``; a forged ``compiled`` result gains nothing, since the judge
loads the extension itself. The start every child shares is ``sandbox.child_side.start_child``.
"""

from __future__ import annotations

from pathlib import Path

from cudarl.tester.sandbox.channel import ResultWriter
from cudarl.tester.sandbox.child_side import describe_exception, file_too_large, start_child


def confine_writes(job: dict) -> str:
    """Confine this child's writes to the build folder and the candidate's folder (the private
    temporary folder is removed after the build; the build folder is an artifact and must not
    collect temporary files)."""
    from cudarl import _compat
    from cudarl.tester.sandbox.write_guard import confine_to

    _compat.cuda_library_include_dirs()  # its shared links are made before writes are confined
    return confine_to(Path(job["candidate_path"]).parent, Path(job["build_root"]))


def run_compile(job: dict, results: ResultWriter) -> None:
    from cudarl.files import import_source
    from cudarl.tester.build.loading import install_load_inline_hook

    writes = confine_writes(job) if job.get("restrict_writes") else "writes unrestricted (sandbox.restrict_writes off)"
    print(f"cudarl: {writes}", flush=True)  # in the build log
    refused: list[str] = []
    built = install_load_inline_hook(Path(job["build_root"]), job["arch"], job["cuda_cflags"],
                                     job["jobs"], stub=False, fast=job.get("inline_fast"), refusals=refused)
    results.send("stage", stage="compile")
    failure: BaseException | None = None
    try:
        import_source(Path(job["candidate_path"]), "cudarl_candidate")
    except BaseException as exc:  # noqa: BLE001 - every failure is the candidate's verdict
        failure = exc
    if refused:  # first: a refusal stands even when the candidate caught it
        results.finish("rejected", "compile", refused, extensions=built)
    if failure is not None:
        results.finish("resource_limit" if file_too_large(failure) else "compile_error", "compile",
                       [describe_exception(failure)], extensions=built)
    results.finish("compiled", "compile", extensions=built)


def apply_child_limits(limits: dict) -> dict:
    """The limits, and (with ``isolate_pids``) this child made the reaper of what it starts."""
    from cudarl.tester.sandbox.isolation import apply_limits, become_subreaper

    applied = apply_limits(limits)
    if limits.get("isolate_pids"):
        applied["subreaper"] = become_subreaper()
    return applied


def _import_builder(_arguments) -> None:
    from cudarl import _compat

    _compat.import_cpp_extension()  # torch and its extension builder: the slow imports


def main() -> None:
    started = start_child(__doc__, apply_child_limits, warm_up=_import_builder, failed_stage="guard")
    if started.job is None:
        return  # a warm child whose pool closed
    if started.job["kind"] == "compile":
        run_compile(started.job, started.results)
    else:
        started.results.finish("harness_error", "guard", [f"unknown job kind {started.job['kind']!r}"])


if __name__ == "__main__":
    main()
