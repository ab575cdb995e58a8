"""``cudarl tester ...``: run the tester pool as a service and steer it. Thin; imports Ray late.

    cudarl tester serve [--address A] [--detach]     start the pool (local Ray without --address)
    cudarl tester scale --compile N --bench M        pin worker counts on a running pool ("auto": autoscale)
    cudarl tester stats                              the running pool's counts, queues and workers
    cudarl tester stop                               stop it
"""

from __future__ import annotations

import argparse
import json
import time


def _config(args: argparse.Namespace):
    from cudarl.config import load_config

    config = load_config(args.config)
    if getattr(args, "detach", False):
        config = config.model_copy(update={"pool": config.pool.model_copy(update={"detached": True})})
    return config


def _serve(args: argparse.Namespace) -> int:
    from cudarl.config import ConfigError
    from cudarl.pool import PoolError, start_pool

    if args.detach and not args.address:
        print("error: --detach needs --address (a local Ray started here ends with this process)")
        return 2
    try:
        pool = start_pool(_config(args), address=args.address)
    except (ConfigError, PoolError) as exc:
        print(f"error: {exc}")
        return 2
    if args.compile is not None or args.bench is not None:
        pool.scale(compile=args.compile, bench=args.bench)
    import ray

    # the address, so that other commands can name this cluster (--address) where "auto" could
    # find several on one machine
    print(f"tester pool {pool.name!r} running on Ray at {ray.get_runtime_context().gcs_address}"
          + (" (detached)" if args.detach else "; Ctrl-C stops it"), flush=True)
    if args.detach:
        return 0

    try:
        while True:
            try:
                stats = pool.stats()
            except ray.exceptions.RayActorError:
                print("the pool was stopped", flush=True)
                return 0
            workers = stats["workers"]
            print(f"[{stats['uptime_s']:8.0f} s] "
                  f"compile {workers['compile']['ready']} ready/{workers['compile']['busy']} busy, "
                  f"bench {workers['bench']['ready']}/{workers['bench']['busy']}, queued {stats['queued']}, "
                  f"verdicts {stats['verdicts']}", flush=True)
            time.sleep(args.every)
    except KeyboardInterrupt:
        pool.shutdown()
    return 0


def _find(args: argparse.Namespace):
    from cudarl.pool import find_pool

    settings = _config(args).pool
    return find_pool(settings.name, settings.namespace, args.address)


def _scale(args: argparse.Namespace) -> int:
    from cudarl.pool import PoolError

    if args.compile is None and args.bench is None:
        print("error: give --compile and/or --bench (a count, or auto)")
        return 2
    try:
        stats = _find(args).scale(compile=args.compile, bench=args.bench)
    except PoolError as exc:
        print(f"error: {exc}")
        return 2
    print(json.dumps(stats["workers"], indent=2))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from cudarl.pool import PoolError

    try:
        print(json.dumps(_find(args).stats(), indent=2))
    except PoolError as exc:
        print(f"error: {exc}")
        return 2
    return 0


def _stop(args: argparse.Namespace) -> int:
    from cudarl.pool import PoolError

    try:
        _find(args).shutdown()
    except PoolError as exc:
        print(f"error: {exc}")
        return 2
    print("stopped")
    return 0


def _count(value: str) -> int | str:
    if value == "auto":
        return value
    count = int(value)
    if count < 0:
        raise argparse.ArgumentTypeError("a worker count must be >= 0 (or auto)")
    return count


def add_parser(commands) -> None:
    tester = commands.add_parser("tester", help="run the tester pool on a Ray cluster and steer it")
    actions = tester.add_subparsers(dest="action", required=True)
    for name, handler, text in (("serve", _serve, "start the pool (and keep printing its state)"),
                                ("scale", _scale, "pin worker counts on a running pool"),
                                ("stats", _stats, "print a running pool's stats as JSON"),
                                ("stop", _stop, "stop a running pool")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--address", default=None if name == "serve" else "auto",
                            help="Ray cluster address (serve: a local Ray when omitted; others: auto)")
        action.add_argument("--config", help="TOML config file ([pool] and [tester] sections)")
        if name in ("serve", "scale"):
            action.add_argument("--compile", type=_count, help="compile workers: a count, or auto")
            action.add_argument("--bench", type=_count, help="bench workers: a count, or auto")
        if name == "serve":
            action.add_argument("--detach", action="store_true", help="leave the pool running after this command exits")
            action.add_argument("--every", type=float, default=10.0, help="seconds between state lines")
        action.set_defaults(handler=handler)
