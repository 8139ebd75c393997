"""The running code's version: the package version and a digest of the project's Python sources.

An acceptance run is recorded with the code version it ran on, and a live route may be enabled only
while the latest run passed on the code version running now (docs/concepts/acceptance.md#live).
The package version alone does not change when the code does between releases, so the version
carries a digest of every Python source of the project's installed apps (the apps under the
project directory: conduit, ingress, replies, reconcile, console, platforms, simulators), computed
once per process.
"""

from __future__ import annotations

import hashlib
import importlib
from functools import cache
from importlib import metadata
from pathlib import Path

from django.conf import settings

DIGEST_CHARS = 12


def _package_version() -> str:
    try:
        return metadata.version("conduit")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unpackaged"


def project_packages() -> list[Path]:
    """The directories of the installed apps' top-level packages that sit in the project directory
    (a virtualenv inside it holds the libraries: they are not the project's code)."""
    base = Path(settings.BASE_DIR).resolve()
    packages = set()
    for app in settings.INSTALLED_APPS:
        top = app.split(".")[0]
        module = importlib.import_module(top)
        path = Path(module.__file__).resolve().parent
        if path.parent == base:
            packages.add(path)
    return sorted(packages)


def sources_digest(packages: list[Path]) -> str:
    """SHA-256 over each Python source's path (relative to its package's parent) and bytes."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package.parent)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@cache
def code_version() -> str:
    """`<package version>+<first 12 hex of the sources' digest>`, e.g. `0.1.0+3f9a1c0d2b7e`."""
    return f"{_package_version()}+{sources_digest(project_packages())[:DIGEST_CHARS]}"
