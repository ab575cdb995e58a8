"""The tester: judges CUDA kernel candidates (guard, compile, sandboxed run, correctness, timing).

Covered: candidates that do not parse, lack ``ModelNew`` or have no CUDA kernel (guard); compile
errors and hung builds (compile stage, trimmed errors, timeout); crashes, hangs, CUDA errors,
early exits, memory hogs, output floods, network use and large files in the candidate (a fresh
sandboxed child per candidate); wrong values, shapes, dtypes, NaN/Inf, tensor subclasses,
in-place writes to inputs and size-specialized code (5 fresh trials plus 2 at the hidden shapes);
work left on side streams (charged in timing); outputs that change during timing (re-check).

Not covered yet (the reward-hacking issue): candidates that inspect or patch the harness from
inside the child (read the seed's generator, forge the result pipe, patch torch or the timer),
decoy kernels with torch doing the work, stale-memory reuse, result caching across calls,
persisting-L2 tricks, and processes that escape the process group.
"""

from cudarl.tester.candidate import Candidate, load_candidates
from cudarl.tester.tester import Tester
from cudarl.tester.verdict import Outcome, Stage, Verdict

__all__ = ["Candidate", "Outcome", "Stage", "Tester", "Verdict", "load_candidates"]
