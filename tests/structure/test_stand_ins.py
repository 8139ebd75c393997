"""The stand-ins stand beside the house: no module of the apps imports `simulators` except the one
seam (conduit/standins.py), and no module of the house (migrations aside) grows past MAX_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The packages that may reach the stand-ins only through the seam.
APPS = ("conduit", "ingress", "replies", "reconcile", "console", "platforms")
STAND_INS = "simulators"
SEAM = "conduit/standins.py"
# The rooms held to MAX_LINES per module: every package of the house and its stand-ins.
SIZED_ROOMS = ("conduit", "ingress", "replies", "reconcile", "console", "platforms", "simulators")
MAX_LINES = 450
# Dynamic imports that name a module by a string literal.
IMPORTERS = {"import_module", "__import__", "import_string"}


def _module(path: Path, root: Path) -> tuple[str, bool]:
    """(dotted module name, whether it is a package's __init__)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules an import statement (or a dynamic import of a literal) names, relative ones resolved;
    `from package import name` also names `package.name` (it may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1] if node.level else []
        target = ".".join([*base, *([node.module] if node.module else [])])
        return [target, *(f"{target}.{alias.name}" for alias in node.names)]
    if (
        isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called in IMPORTERS:
            return [node.args[0].value]
    return []


def stand_in_imports(root: Path, apps: tuple[str, ...] = APPS, seam: str = SEAM) -> list[str]:
    """`path:line: imports name` for every import of the stand-ins in the apps' modules (migrations
    aside) other than the seam's."""
    found = []
    for package in apps:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative == seam or "migrations" in path.relative_to(root).parts:
                continue
            module, is_package = _module(path, root)
            for node in ast.walk(ast.parse(path.read_text(), filename=relative)):
                for name in _names(node, module, is_package):
                    if name == STAND_INS or name.startswith(STAND_INS + "."):
                        found.append(f"{relative}:{node.lineno}: imports {name}")
                        break
    return found


def oversized(root: Path, rooms: tuple[str, ...] = SIZED_ROOMS, limit: int = MAX_LINES) -> list[str]:
    """`path: N lines` for every module of the rooms longer than `limit` lines."""
    found = []
    for room in rooms:
        for path in sorted((root / room).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:  # generated, and never edited
                continue
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines (at most {limit})")
    return found


def test_no_app_module_imports_the_stand_ins_but_the_seam():
    found = stand_in_imports(ROOT)
    assert not found, "import the stand-ins through conduit.standins only:\n" + "\n".join(found)


def test_the_seam_is_there_and_names_the_stand_ins_by_setting():
    from django.conf import settings

    source = (ROOT / SEAM).read_text()
    assert "import_string" in source and "CONDUIT_STAND_INS" in source
    assert settings.CONDUIT_STAND_INS == STAND_INS and STAND_INS in settings.INSTALLED_APPS


def test_control_every_spelling_of_a_stand_in_import_is_reported(tmp_path):
    """Positive control: absolute, from-package, function-level, relative and dynamic imports in a
    planted tree are each reported with their file and line; the seam and migrations are not."""
    planted = {
        "conduit/standins.py": "from simulators import testkit\n",
        "conduit/plain.py": "import simulators.meta\n",
        "ingress/migrations/0001_initial.py": "import simulators\n",
        "ingress/fromed.py": "import json\nfrom simulators.sandbox import serve\n",
        "replies/later.py": "def later():\n    from simulators import testkit\n",
        "reconcile/dynamic.py": "import importlib\n\nimportlib.import_module('simulators.meta')\n",
        "reconcile/clean.py": "from reconcile.proof import canary\nfrom conduit import standins\n",
    }
    for relative, text in planted.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    # A relative import reaches the stand-ins only from inside them: planted as a package of its own.
    (tmp_path / "simulators").mkdir()
    (tmp_path / "simulators" / "__init__.py").write_text("from .meta import serve\n")
    found = stand_in_imports(tmp_path, apps=(*APPS, "simulators"))
    assert found == [
        "conduit/plain.py:1: imports simulators.meta",
        "ingress/fromed.py:2: imports simulators.sandbox",
        "replies/later.py:2: imports simulators",
        "reconcile/dynamic.py:3: imports simulators.meta",
        "simulators/__init__.py:1: imports simulators.meta",
    ]


def test_no_module_of_the_sized_rooms_exceeds_the_limit():
    assert all((ROOT / room).is_dir() for room in SIZED_ROOMS)
    found = oversized(ROOT)
    assert not found, "split these into concept modules:\n" + "\n".join(found)


def test_control_a_module_past_the_limit_is_reported(tmp_path):
    """Positive control: a module one line past the limit is reported, one at the limit is not."""
    room = tmp_path / "conduit" / "providers" / "planted"
    room.mkdir(parents=True)
    (room / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (room / "even.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "ingress" / "migrations").mkdir(parents=True)
    (tmp_path / "ingress" / "migrations" / "0001_initial.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(tmp_path, rooms=("conduit/providers", "ingress")) == [
        f"conduit/providers/planted/long.py: {MAX_LINES + 1} lines (at most {MAX_LINES})"
    ]
