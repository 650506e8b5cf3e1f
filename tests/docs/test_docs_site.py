"""The documentation site builds with MkDocs, warnings as errors (broken links and anchors included),
and the README front page stays a front page."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_without_a_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, not about the docs
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"),
                            "--config-file", str(ROOT / "mkdocs.yml")], capture_output=True, text=True, timeout=300,
                           env=env)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "passes" / "index.html").is_file()
    assert "WARNING" not in built.stderr, built.stderr


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if p not in nav] == []


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for heading in ("## Install", "## Fuse your model", "## Read the summary", "## Check it", "## Write a pass",
                    "## Run the tests", "## Documentation"):
        assert heading in text, heading
    assert text.index("## Install") < text.index("## Fuse your model") < text.index("## Check it") \
        < text.index("## Write a pass")
