"""The Ray Serve application: ``POST /v1/optimize``, ``GET /healthz``, the A/B split's state and
weights (``GET /v1/ab``, ``PUT /v1/ab/weights``), FastAPI's OpenAPI page (``/docs``).

Two deployments. ``AgentServer`` replicas each hold one engine with every version's two adapters
(``<version>-generator``, ``<version>-optimizer``) and a client of the tester pool (the named
pool actor, started on first use), and run one request at a time (an engine is not shared by
threads); more replicas, more requests at once, all judged by the one pool. The ``Gateway``
checks each request (one-line 4xx answers), picks the version (``ab.ABSplit``), bounds the wait
(budget seconds + ``serve.grace_s``: 504 past it), records the outcome for the rollback, and
exports metrics (``cudarl.metrics.ServeMetrics``).

Covered: the app, its config from ``[serve]``, ``build_app`` for ``serve run``. Not covered:
sharing the A/B outcomes between gateway replicas (one gateway replica by default).
"""


import asyncio
import time

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from ray import serve

from cudarl.serve.schemas import OptimizeAnswer, OptimizeRequest, RequestError

api = FastAPI(title="cudarl", description="CUDA kernels from cudarl's trained agents, verified by its tester.")


class AgentServer:
    """An engine with every version's adapters and a tester-pool client; one request at a time."""

    def __init__(self, config: dict) -> None:
        from transformers import AutoTokenizer

        from cudarl.config import CudarlConfig
        from cudarl.pool import start_pool
        from cudarl.rollout.adapters import read_adapter_folder
        from cudarl.rollout.chat import ChatTokens
        from cudarl.rollout.loading import load_engine

        self.config = CudarlConfig.model_validate(config)
        settings = self.config.serve
        versions = settings.versions or {"base": ""}
        with_adapters = any(versions.values())
        device = "cuda" if settings.gpus_per_agent > 0 else "cpu"
        self.engine = load_engine(settings.model, settings.engine, settings.dtype, device, lora=with_adapters)
        self.chat = ChatTokens(AutoTokenizer.from_pretrained(settings.model))
        self.adapters: dict[str, tuple[str | None, str | None]] = {}
        for version, folder in versions.items():
            if not folder:
                self.adapters[version] = (None, None)
                continue
            names = []
            for role in ("generator", "optimizer"):
                lora, weights = read_adapter_folder(_role_folder(folder, role))
                name = f"{version}-{role}"
                self.engine.add_adapter(name, lora)
                self.engine.update_weights(weights, version=1, adapter=name)
                names.append(name)
            self.adapters[version] = (names[0], names[1])
        self.pool = start_pool(self.config)

    def optimize(self, task, budget, version: str) -> OptimizeAnswer:
        from cudarl.rollout.engine import SamplingSettings
        from cudarl.serve.optimize import run_request

        settings = self.config.serve
        sampling = SamplingSettings(max_new_tokens=settings.max_new_tokens, temperature=settings.temperature)
        return run_request(self.engine, self.chat, self.pool.judge, task, budget, version, self.adapters[version],
                           sampling, settings.target_speedup)


def _role_folder(folder: str, role: str):
    from pathlib import Path

    path = Path(folder) / role
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"{folder}: no {role}/ adapter folder (a cudarl train checkpoint or cudarl sft output "
                         "holds generator/ and optimizer/)")
    return path


class Weights(BaseModel):
    weights: dict[str, float]


@serve.ingress(api)
class Gateway:
    """Checks, the A/B choice, the time bound, the outcome record, the metrics."""

    def __init__(self, agents, config: dict) -> None:
        from cudarl.config import CudarlConfig
        from cudarl.metrics import ServeMetrics
        from cudarl.serve.ab import ABSplit
        from cudarl.tasks.builtin import load_suite

        self.agents, self.config = agents, CudarlConfig.model_validate(config)
        settings = self.config.serve
        self.split = ABSplit(settings.split_weights(), settings.rollback_below, settings.rollback_min_requests,
                             settings.rollback_window)
        self.suite = {task.id: task for task in load_suite()}
        self.metrics = ServeMetrics()
        self._export_weights()

    def _export_weights(self) -> None:
        for version, state in self.split.state().items():
            self.metrics.weight.set(state["weight"], tags={"version": version})

    def _answer(self, version: str, status: int, started: float) -> None:
        self.metrics.requests.inc(tags={"version": version, "status": str(status)})
        if version != "none":
            self.metrics.latency.observe(time.monotonic() - started, tags={"version": version})

    @api.get("/healthz")
    def healthz(self) -> dict:
        return {"status": "ok", "versions": sorted(self.split.arms)}

    @api.get("/v1/ab")
    def ab_state(self) -> dict:
        return self.split.state()

    @api.put("/v1/ab/weights")
    def set_weights(self, body: Weights) -> dict:
        unknown = sorted(set(body.weights) - set(self.config.serve.versions or {"base": ""}))
        if unknown:
            raise HTTPException(status_code=400, detail=f"no such version(s) served: {unknown}")
        try:
            self.split.set_weights(body.weights)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        self._export_weights()
        return self.split.state()

    @api.post("/v1/optimize", response_model=OptimizeAnswer)
    async def optimize(self, body: OptimizeRequest):
        started = time.monotonic()
        try:
            task = body.task(self.suite)
        except RequestError as exc:
            self._answer("none", 404 if body.task_id else 400, started)
            raise HTTPException(status_code=404 if body.task_id else 400, detail=str(exc)) from exc
        version = self.split.choose(body.client_key)
        limit = body.budget.seconds + self.config.serve.grace_s
        try:
            answer = await asyncio.wait_for(self.agents.optimize.remote(task, body.budget, version), timeout=limit)
        except TimeoutError:
            self._answer(version, 504, started)
            detail = (f"no answer within {limit:g} s (the budget's {body.budget.seconds:g} s plus "
                      f"{self.config.serve.grace_s:g})")
            return JSONResponse(status_code=504, content={"detail": detail, "version": version})
        if not answer.turns:  # the budget ran out before the first turn (waiting for a free agent)
            self._answer(version, 408, started)
            detail = (f"the budget of {body.budget.seconds:g} s ran out before the first turn started "
                      f"(waited {time.monotonic() - started:.1f} s for a free agent)")
            return JSONResponse(status_code=408, content={"detail": detail, "version": version})
        verified = answer.kernel is not None
        if verified:
            self.metrics.verified.inc(tags={"version": version})
        rolled_back = self.split.record(version, verified)
        if rolled_back:
            self._export_weights()
        self._answer(version, 200, started)
        return answer


def build_app(args: dict | None = None):
    """The application for ``serve run cudarl.serve.app:build_app config=<toml>`` (and
    ``deploy/serve.yaml``): the ``[serve]`` section of the config file (defaults without one)."""
    from cudarl.config import load_config

    return app_from_config(load_config((args or {}).get("config")))


def app_from_config(config):
    """The application for a ``CudarlConfig`` (``cudarl serve``, tests)."""
    settings = config.serve
    agents = serve.deployment(AgentServer, name="AgentServer", num_replicas=settings.agent_replicas,
                              max_ongoing_requests=1,
                              ray_actor_options={"num_cpus": 1, "num_gpus": settings.gpus_per_agent}
                              ).bind(config.model_dump(mode="json"))
    return serve.deployment(Gateway, name="Gateway", max_ongoing_requests=256).bind(
        agents, config.model_dump(mode="json"))
