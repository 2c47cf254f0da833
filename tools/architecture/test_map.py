"""The map check (check_map.py) passes on the tree, and fails on a target without a row or with wrong imports."""

from __future__ import annotations

import shutil
from pathlib import Path

from check_map import differences  # beside this file: pytest puts its folder on sys.path

REPO = Path(__file__).resolve().parents[2]


def copy_of_the_map(tmp_path: Path) -> Path:
    for name in ("Package.swift", "docs/architecture.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    for folder in ("Sources", "Tests"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    return tmp_path


def test_the_map_is_true():
    assert differences(REPO) == []


def test_a_target_without_a_row_fails(tmp_path):
    repo = copy_of_the_map(tmp_path)
    package = repo / "Package.swift"
    package.write_text(package.read_text().replace(
        '.target(name: "CTAPCBOR"',
        '.target(name: "Unmapped", dependencies: ["CTAPCBOR"]),\n        .target(name: "CTAPCBOR"'))
    (repo / "Sources" / "Unmapped").mkdir()
    (repo / "Sources" / "Unmapped" / "Unmapped.swift").write_text("import CTAPCBOR\n")
    assert differences(repo) == ["Unmapped: no row in docs/architecture.md"]


def test_an_import_the_map_does_not_name_fails(tmp_path):
    repo = copy_of_the_map(tmp_path)
    (repo / "Sources" / "CTAPCBOR" / "Sneaky.swift").write_text("package import Logging\n")
    problems = differences(repo)
    assert len(problems) == 1 and problems[0].startswith("CTAPCBOR:") and "missing ['Logging']" in problems[0]
