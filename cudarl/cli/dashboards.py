"""``cudarl dashboards export / install``: the Grafana dashboards of ``cudarl.dashboards``,
written as JSON files or pushed to a Grafana through its HTTP API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _export(args: argparse.Namespace) -> int:
    from cudarl.dashboards import export

    for path in export(Path(args.out)):
        print(path)
    return 0


def _install(args: argparse.Namespace) -> int:
    from cudarl.dashboards import install

    try:
        urls = install(args.grafana, args.token, args.folder)
    except Exception as exc:  # noqa: BLE001 - any failure of the HTTP API: one line, exit 2
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"cudarl dashboards install: {args.grafana}: {type(exc).__name__}: {first}", file=sys.stderr)
        return 2
    for url in urls:
        print(f"{args.grafana.rstrip('/')}{url}")
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("dashboards", help="Grafana dashboards: write them as JSON or push them to a Grafana")
    verbs = parser.add_subparsers(dest="verb", required=True)
    export = verbs.add_parser("export", help="write the dashboards' JSON models")
    export.add_argument("--out", default="dashboards", help="folder (default: dashboards)")
    export.set_defaults(handler=_export)
    install = verbs.add_parser("install", help="create or update the dashboards in a Grafana")
    install.add_argument("--grafana", required=True, help="Grafana's URL (may hold user:password@)")
    install.add_argument("--token", help="an API token or service account token instead of a password")
    install.add_argument("--folder", default="cudarl", help="the Grafana folder (default: cudarl)")
    install.set_defaults(handler=_install)
