"""The ground floor stays the ground floor: no module under conduit/providers/ imports an app."""

from __future__ import annotations

import ast
import re
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
        "ingress.models",
        "replies.sender",
    }
    assert len(PROVIDER_MODULES) >= 8  # the package is there to be checked


# The apps' direction: conduit <- ingress <- replies <- reconcile <- console <- platforms (which may
# import every app and the providers, and which no app imports: it registers into them). Ingest plans replies inside its
# transaction through the planner replies registers (ingress.hooks), not by importing it.
ALLOWED_UPWARD: set[tuple[str, str]] = set()
LEVEL = {"conduit": 0, "ingress": 1, "replies": 2, "reconcile": 3, "console": 4, "platforms": 5}


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


def test_apps_import_one_way():
    assert upward_imports() == ALLOWED_UPWARD


def test_the_direction_check_sees_an_upward_import():
    """Positive control: a planted reconcile import in a replies module is reported."""
    planted = ROOT / "replies" / "_planted_upward_import_test.py"
    planted.write_text("from reconcile.models import Finding\n")
    try:
        assert ("replies/_planted_upward_import_test.py", "reconcile.models") in upward_imports()
    finally:
        planted.unlink()


def platforms_imports() -> set[tuple[str, str]]:
    """(module, import) for every import of `platforms` by a module of conduit or an app."""
    found = set()
    for app in ("conduit", "ingress", "replies", "reconcile", "console"):
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or path == COMPOSITION_ROOT:
                continue
            for name in imported_modules(path.read_text()):
                if name.split(".")[0] == "platforms":
                    found.add((str(path.relative_to(ROOT)), name))
    return found


def test_no_app_imports_the_platforms_package():
    """The platform packages register into the apps' registries; the apps never reach for them."""
    assert platforms_imports() == set()


def test_the_platforms_import_check_sees_a_planted_import():
    """Positive control: a planted import of a platform package in a reconcile module is reported."""
    planted = ROOT / "reconcile" / "_planted_platforms_import_test.py"
    planted.write_text("def later():\n    from platforms.meta import canary\n")
    try:
        assert ("reconcile/_planted_platforms_import_test.py", "platforms.meta") in platforms_imports()
    finally:
        planted.unlink()


# --- the apps never name a platform ---------------------------------------------------------------
# Windows, budgets, capabilities and error meanings are data on the platforms' classes
# (conduit.providers); the apps ask through them. Each platform's proof pieces live in platforms/.
PLATFORM_NEUTRAL_APPS = ("ingress", "replies", "reconcile", "console")
PLATFORM_WORDS = ("meta", "instagram", "facebook", "sandbox")
# Django's own vocabulary, which happens to spell a platform's name: the inner `class Meta`,
# `model._meta` and `request.META`.
FRAMEWORK_NAMES = {"Meta", "_meta", "META"}
PROVIDERS = ROOT / "conduit" / "providers"
# A platform is a package under conduit/providers/; its modules beside them (base, registry, reading,
# transport, keepalive...) are platform-neutral.
PLATFORM_PACKAGES = sorted(p.name for p in PROVIDERS.iterdir() if (p / "__init__.py").exists())


def _registered_names() -> set[str]:
    from conduit.providers.registry import ADAPTERS, TRANSPORTS

    callbacks = {cls.shared_callback.platform for cls in ADAPTERS.values() if cls.shared_callback}
    return set(ADAPTERS) | set(TRANSPORTS) | callbacks


def _words(identifier: str) -> list[str]:
    """An identifier's words, lower-cased: split at underscores and where a capital starts one."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", identifier)
    return [w.lower() for w in spaced.split("_") if w]


def _identifiers(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[-1]]
    return []


def _platform_import(node: ast.AST) -> str:
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        modules = [node.module]
        if node.module == "conduit.providers":
            modules += [f"conduit.providers.{alias.name}" for alias in node.names]
    else:
        return ""
    for module in modules:
        parts = module.split(".")
        if parts[:2] == ["conduit", "providers"] and len(parts) > 2 and parts[2] in PLATFORM_PACKAGES:
            return module
    return ""


def platform_names(path: Path, names: set[str]) -> list[str]:
    """Where a module names a platform: `file:line what` for each import of a platform's package,
    string equal to a registered adapter, transport or callback name, or identifier with a
    platform's name as one of its words."""
    found = []
    where = path.relative_to(ROOT)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        line = getattr(node, "lineno", None)
        module = _platform_import(node)
        if module:
            found.append(f"{where}:{line} imports {module}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append(f"{where}:{line} names {node.value!r}")
        for identifier in _identifiers(node):
            if identifier not in FRAMEWORK_NAMES and set(_words(identifier)) & set(PLATFORM_WORDS):
                found.append(f"{where}:{line} identifier {identifier}")
    return found


def app_platform_names() -> list[str]:
    names = _registered_names()
    found = []
    for app in PLATFORM_NEUTRAL_APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                found += platform_names(path, names)
    return found


def test_the_apps_name_no_platform():
    assert app_platform_names() == []


def test_the_platform_check_sees_a_literal_an_import_and_a_name():
    """Positive control: a planted adapter literal, platform import and platform-named identifier
    in a temporary replies module are each reported with their line."""
    assert {"meta", "sandbox"} <= set(PLATFORM_PACKAGES)
    planted = ROOT / "replies" / "_planted_platform_name_test.py"
    planted.write_text(
        "from conduit.providers.meta.graph import graph_request\n"
        "from conduit.providers import sandbox\n"
        'ADAPTER = "meta-page"\n'
        "instagram_window = 7\n"
        "class Meta:\n"  # Django's vocabulary: not a platform
        "    ordering = ()\n"
    )
    try:
        found = set(app_platform_names())
    finally:
        planted.unlink()
    where = "replies/_planted_platform_name_test.py"
    assert {
        f"{where}:1 imports conduit.providers.meta.graph",
        f"{where}:2 imports conduit.providers.sandbox",
        f"{where}:3 names 'meta-page'",
        f"{where}:4 identifier instagram_window",
    } <= found
    assert not any(f.startswith(f"{where}:5") for f in found)
