"""``wait_until_fits`` on a real local Ray: a share held by an actor that is being killed comes
back seconds later, and a run started right after another one must wait for it, not refuse (seen
on two GPUs: the resumed run's policy was refused while the first run's workers still held their
GPU shares). More than the whole cluster holds is refused at once; a share that never comes back
is refused after the wait, with the numbers."""

from __future__ import annotations

import threading
import time

import pytest
import ray

from cudarl.rl.group import UpdateWorkersError, wait_until_fits


@ray.remote(num_cpus=1)
class _Holder:
    def ping(self) -> bool:
        return True


def test_a_share_being_released_is_waited_for_and_one_never_released_is_refused(own_ray):
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        with pytest.raises(UpdateWorkersError, match=r"need 3 CPU \(3 x 1\) but the cluster has 2 CPU"):
            wait_until_fits(3, {"CPU": 1.0}, timeout_s=30)  # more than the cluster: at once, no wait
        holder = _Holder.remote()
        ray.get(holder.ping.remote())
        threading.Timer(2.0, lambda: ray.kill(holder)).start()
        started = time.monotonic()
        wait_until_fits(2, {"CPU": 1.0}, timeout_s=60)  # both CPUs: only once the holder is gone
        waited = time.monotonic() - started
        kept = _Holder.remote()
        ray.get(kept.ping.remote())
        with pytest.raises(UpdateWorkersError, match=r"need 2 CPU \(2 x 1\) but the cluster has 1 CPU free"):
            wait_until_fits(2, {"CPU": 1.0}, timeout_s=2)
    finally:
        ray.shutdown()
    assert waited >= 1.5  # it did wait for the kill (at 2 s), and did not refuse
