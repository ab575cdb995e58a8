"""The slowest tests of one or more JUnit reports (pytest --junitxml), as a table: CI prints it at
its end so that a test that grew slow is seen where the time goes. Usage:
``python3 scripts/slowest.py [--top N] REPORT.xml ...`` (a missing report is named, not fatal)."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def test_times(report: Path) -> list[tuple[float, str, str]]:
    """(seconds, test id, result) of every test case in ``report``."""
    rows = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        result = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name', '')}"
        rows.append((float(case.get("time") or 0.0), name, result))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    arguments = parser.parse_args()
    rows = []
    for report in arguments.reports:
        if not report.is_file():
            print(f"slowest: no report at {report} (that phase did not get to write one)")
            continue
        rows += [(seconds, name, result, report.stem) for seconds, name, result in test_times(report)]
    rows.sort(reverse=True)
    print(f"The {min(arguments.top, len(rows))} slowest tests (of {len(rows)}):")
    print(f"{'seconds':>9}  {'suite':<8} {'result':<8} test")
    for seconds, name, result, suite in rows[:arguments.top]:
        print(f"{seconds:9.1f}  {suite:<8} {result:<8} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
