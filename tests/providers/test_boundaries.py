"""The ground floor stays the ground floor: no module under conduit/providers/ imports an app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("ingress", "replies", "reconcile", "django", "rest_framework", "django_q")


def imported_modules(source: str) -> set[str]:
    """Every module an import statement names, at any depth of the file (function bodies too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def app_imports(path: Path) -> set[str]:
    return {name for name in imported_modules(path.read_text()) if name.split(".")[0] in APPS}


PROVIDER_MODULES = sorted((ROOT / "conduit" / "providers").rglob("*.py"))


@pytest.mark.parametrize("path", PROVIDER_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_provider_module_imports_no_app_and_no_framework(path):
    assert app_imports(path) == set()


def test_the_check_sees_imports_wherever_they_are():
    """Positive control: an app import hidden in a function body is caught."""
    planted = "def later():\n    from ingress.models import Source\n    import replies.sender\n"
    assert {n for n in imported_modules(planted) if n.split(".")[0] in APPS} == {
        "ingress.models", "replies.sender"}
    assert len(PROVIDER_MODULES) >= 8  # the package is there to be checked


# The apps' direction: conduit <- ingress <- replies <- reconcile. The one crossing the design
# needs is ingest planning replies inside its transaction.
ALLOWED_UPWARD = {("ingress/services.py", "replies.services")}
LEVEL = {"conduit": 0, "ingress": 1, "replies": 2, "reconcile": 3}


# The URLconf is the composition root: it names every app's views by design.
COMPOSITION_ROOT = ROOT / "conduit" / "urls.py"


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for app, level in LEVEL.items():
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or path == COMPOSITION_ROOT:
                continue
            for name in imported_modules(path.read_text()):
                target = LEVEL.get(name.split(".")[0])
                if target is not None and target > level:
                    found.add((str(path.relative_to(ROOT)), name))
    return found


def test_apps_import_one_way_with_the_planning_call_the_single_exception():
    assert upward_imports() == ALLOWED_UPWARD


def test_the_direction_check_sees_an_upward_import():
    """Positive control: a planted reconcile import in a replies module is reported."""
    planted = ROOT / "replies" / "_planted_upward_import_test.py"
    planted.write_text("from reconcile.models import Finding\n")
    try:
        assert ("replies/_planted_upward_import_test.py", "reconcile.models") in upward_imports()
    finally:
        planted.unlink()
