"""The reference is the MkDocs site in docs/: it builds without a warning, and the README stays a
short front door that links to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 300


def _mkdocs_config() -> dict:
    # mkdocs.yml uses no custom tags, so the plain loader reads it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_mkdocs_build_strict_has_no_warnings(tmp_path):
    """Broken links, bad anchors, pages missing from the nav: each is a warning, and --strict
    makes any warning fail the build."""
    # The test extra installs mkdocs-material; without it this fails (never skips).
    import material  # noqa: F401
    import mkdocs  # noqa: F401

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    warnings = [line for line in output.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert warnings == [], "\n".join(warnings)
    assert (tmp_path / "site" / "index.html").is_file()


def test_mkdocs_config_builds_docs_into_an_ignored_folder():
    config = _mkdocs_config()
    assert config["docs_dir"] == "docs"
    assert config["theme"]["name"] == "material"
    site_dir = config["site_dir"]
    assert not Path(site_dir).is_absolute()
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{site_dir}/index.html"], cwd=ROOT)
    assert ignored.returncode == 0, f"{site_dir}/ is not git-ignored"


def test_every_page_in_docs_is_in_the_nav():
    def pages(entries) -> set[str]:
        found: set[str] = set()
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found |= pages(value) if isinstance(value, list) else {value}
        return found

    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages(_mkdocs_config()["nav"]) == on_disk
    assert "roles.md" in on_disk


def test_the_readme_is_short_and_links_to_the_docs():
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]*))?\)", readme)
    assert "docs/index.md" in {page for page, _ in links}
    missing = [page for page, _ in links if not (ROOT / page).is_file()]
    assert missing == [], f"README.md links to missing docs pages: {missing}"
    # mkdocs checks the site's own anchors; the README's point at the pages' explicit ids.
    bad = [
        f"{page}#{anchor}"
        for page, anchor in links
        if anchor and "{#" + anchor + "}" not in (ROOT / page).read_text()
    ]
    assert bad == [], f"README.md links to missing anchors: {bad}"
    # The two commands stay on the front door.
    assert "make demo" in readme and "make test" in readme
