#!/usr/bin/env python3
"""The map is true: every target of Package.swift has a row in docs/architecture.md that names the modules its
sources import, exactly.

    check_map.py [REPO]     exit 0 when the map is true; else each difference, and exit 1

A row is a Markdown table row whose first cell is the target's name in backticks (or several, comma-separated, that
import the same) and whose last cell lists the modules it imports, each in backticks ("nothing" for none). The
toolchain's own modules (Glibc, Foundation, Testing, ...) are left out of both sides.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TOOLCHAIN = {"Glibc", "Foundation", "FoundationEssentials", "Synchronization", "Testing", "XCTest", "Dispatch",
             "Darwin", "_Concurrency"}
KINDS = ("target", "executableTarget", "testTarget", "systemLibrary")


def targets(package: str) -> dict[str, str]:
    """Each target's name and kind, from Package.swift's text."""
    found = {}
    for match in re.finditer(r"\.(%s)\(\s*name:\s*\"([^\"]+)\"" % "|".join(KINDS), package):
        found[match.group(2)] = match.group(1)
    return found


def source_imports(folder: Path) -> set[str]:
    """The modules the Swift files under `folder` import (any access level, @testable too)."""
    modules = set()
    pattern = re.compile(r"^\s*(?:@testable\s+)?(?:(?:package|public|internal|private|fileprivate)\s+)?import\s+"
                         r"(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z0-9_]+)", re.M)
    for path in folder.rglob("*.swift"):
        modules.update(pattern.findall(path.read_text(encoding="utf-8")))
    return modules - TOOLCHAIN


def map_rows(text: str) -> dict[str, set[str]]:
    """Each table row's target (first cell) and the modules named in its last cell."""
    rows = {}
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        # One target, or several sharing a row ("`CUHID`, `CUMockdev`").
        if len(cells) >= 2 and re.fullmatch(r"`[A-Za-z0-9_-]+`(\s*,\s*`[A-Za-z0-9_-]+`)*", cells[0]):
            for name in re.findall(r"`([A-Za-z0-9_-]+)`", cells[0]):
                rows[name] = set(re.findall(r"`([A-Za-z0-9_]+)`", cells[-1]))
    return rows


def differences(repo: Path) -> list[str]:
    package = (repo / "Package.swift").read_text(encoding="utf-8")
    rows = map_rows((repo / "docs" / "architecture.md").read_text(encoding="utf-8"))
    problems = []
    for name, kind in sorted(targets(package).items()):
        folder = repo / ("Tests" if kind == "testTarget" else "Sources") / name
        if name not in rows:
            problems.append(f"{name}: no row in docs/architecture.md")
            continue
        actual = source_imports(folder) if folder.is_dir() else set()
        written = rows[name]
        if actual != written:
            missing, extra = sorted(actual - written), sorted(written - actual)
            problems.append(f"{name}: the map says {sorted(written)}, its sources import {sorted(actual)}"
                            + (f" (missing {missing})" if missing else "")
                            + (f" (not imported {extra})" if extra else ""))
    return problems


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    problems = differences(repo)
    for problem in problems:
        print(f"architecture map: {problem}")
    if not problems:
        print("architecture map: every target of Package.swift has a true row in docs/architecture.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
