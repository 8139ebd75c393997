"""Test machinery stays behind one seam: `simulators.testkit` holds the planted faults, patched
functions, DDL, test client and settings overrides, and nothing of production imports it; the
acceptance checks and the `acceptance` command reach it through conduit.standins only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEAM = "simulators.testkit"
ALLOWED = {"conduit/standins.py"}
PRODUCTION = sorted(
    path
    for package in ("reconcile", "ingress", "replies", "conduit")
    for path in (ROOT / package).rglob("*.py")
    if str(path.relative_to(ROOT)) not in ALLOWED
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module an import statement in `source` names, relative ones resolved, at any depth;
    `from package import name` also counts as `package.name` (it may be a module)."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def imports_seam(path: Path) -> bool:
    names = imported(path.read_text(), module_name(path), is_package=path.name == "__init__.py")
    return any(name == SEAM or name.startswith(SEAM + ".") for name in names)


@pytest.mark.parametrize("path", PRODUCTION, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_production_module_imports_the_test_machinery(path):
    assert not imports_seam(path)


def test_the_check_sees_every_spelling_of_the_import():
    """Positive control: absolute, from-package, relative and function-level imports are caught."""
    for planted in (
        "import simulators.testkit\n",
        "from simulators import testkit\n",
        "from simulators.testkit import patched\n",
        "def later():\n    from . import testkit\n",
        "from .testkit import patched\n",
    ):
        names = imported(planted, "simulators.sandbox")
        assert any(n == SEAM or n.startswith(SEAM + ".") for n in names), planted
    assert not any(
        n.startswith(SEAM) for n in imported("from reconcile.proof import canary\n", "reconcile.admin")
    )
    assert len(PRODUCTION) > 50 and ROOT / "reconcile" / "proof" / "canary.py" in PRODUCTION


_LOADER = """
import importlib, pkgutil, sys
import django
django.setup()
skip = set(sys.argv[1:])

def load(package):
    # Not pkgutil.walk_packages: it imports every package it walks, a skipped one too.
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
        if info.name not in skip:
            load(info.name) if info.ispkg else importlib.import_module(info.name)

for package in ("conduit", "ingress", "replies", "reconcile"):
    load(package)
import conduit.urls
print("LOADED" if "simulators.testkit" in sys.modules else "CLEAN")
"""


def _load_everything(*skip: str) -> str:
    from tests.conftest import subprocess_env

    result = subprocess.run(
        [sys.executable, "-c", _LOADER, *skip],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return result.stdout.decode().strip().splitlines()[-1]


@pytest.mark.django_db
def test_loading_every_production_module_leaves_the_seam_unloaded():
    """Transitively too: a process that imports every module of the apps and conduit (admin,
    urls, commands, tasks) except the acceptance checks never loads the seam."""
    assert (
        _load_everything("reconcile.proof.acceptance", "reconcile.management.commands.acceptance") == "CLEAN"
    )


@pytest.mark.django_db
def test_control_loading_the_acceptance_command_loads_the_seam():
    """Positive control: the loader does see the seam when an allowed importer is loaded."""
    assert _load_everything() == "LOADED"
