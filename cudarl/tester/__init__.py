"""The tester: judges CUDA kernel candidates (guard, compile, sandboxed run, correctness, timing)."""

from cudarl.tester.candidate import Candidate, load_candidates
from cudarl.tester.tester import Tester
from cudarl.tester.verdict import Outcome, Stage, Verdict

__all__ = ["Candidate", "Outcome", "Stage", "Tester", "Verdict", "load_candidates"]
