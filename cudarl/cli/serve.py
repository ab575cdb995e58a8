"""``cudarl serve``: the agents behind HTTP (``cudarl.serve.app``) on an embedded local Ray or a
cluster (``--address``), until Ctrl-C. Settings: the config file's ``[serve]`` table (versions,
A/B weights, rollback, engine, limits), any setting overridden with ``--set table.name=value``.
SIGTERM (a supervisor's stop: systemd, Kubernetes, a shell's ``kill``) stops it as Ctrl-C does: Serve
shut down, exit code 0."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def _serve(args: argparse.Namespace) -> int:
    from cudarl.cli.overrides import parse_overrides
    from cudarl.config import load_config

    config = load_config(args.config)
    changes = parse_overrides(args.set, "table.name=value, e.g. serve.port=8080 (see `cudarl config`)", dotted=True)
    if args.model:
        changes["serve.model"] = args.model
    if args.port:
        changes["serve.port"] = args.port
    if changes:
        config = config.with_changes(changes)
    try:  # before anything starts: a model that cannot be reached is a one-line error
        from transformers import AutoConfig

        AutoConfig.from_pretrained(config.serve.model)
    except (OSError, ValueError) as exc:
        print(f"cudarl serve: model {config.serve.model!r}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    from ray import serve

    from cudarl.pool.client import connect_ray
    from cudarl.serve.app import app_from_config

    # a local Ray gets logical CPUs for every actor the service starts (agent replicas, the gateway,
    # the pool and its compile workers), also on a machine with fewer cores: they mostly wait
    wanted = config.serve.agent_replicas + max(config.pool.max_compile_workers, config.pool.min_compile_workers, 1) + 3
    connect_ray(args.address, num_cpus=None if args.address else max(os.cpu_count() or 1, wanted),
                namespace=config.pool.namespace)
    # after ray.init, whose own SIGTERM handler exits at once and leaves Serve's actors up
    signal.signal(signal.SIGTERM, _stop_as_ctrl_c)
    serve.start(http_options={"host": args.host, "port": config.serve.port})
    serve.run(app_from_config(config), name="cudarl", route_prefix="/")
    where = f"http://{args.host}:{config.serve.port}"
    print(f"cudarl serve: {where}/v1/optimize (OpenAPI: {where}/docs); Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
    print("cudarl serve: stopped", flush=True)
    return 0


def _stop_as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def add_parser(commands) -> None:
    serve_parser = commands.add_parser("serve", help="serve the trained agents over HTTP (POST /v1/optimize)")
    serve_parser.add_argument("--config", help="TOML config file; its [serve] table (see `cudarl config`)")
    serve_parser.add_argument("--model", help="override serve.model")
    serve_parser.add_argument("--port", type=int, help="override serve.port")
    serve_parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    serve_parser.add_argument("--address", help="Ray cluster to run on ('auto': this machine's); default: a local Ray")
    serve_parser.add_argument("--set", action="append", default=[], metavar="TABLE.NAME=VALUE",
                              help="override a setting (repeatable)")
    serve_parser.set_defaults(handler=_serve)
