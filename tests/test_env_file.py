"""manage.py reads the demo's env file where the environment is silent, so banner commands run as printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(env_file: Path, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CONDUIT_TEST_FROM_FILE")}
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import os; print(os.environ.get('CONDUIT_TEST_FROM_FILE', '-'))",
        ],
        cwd=ROOT,
        env={**base, "CONDUIT_ENV_FILE": str(env_file), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


def test_the_env_file_fills_what_the_environment_does_not_set(tmp_path):
    env_file = tmp_path / "demo.env"
    env_file.write_text("SECRET_KEY=from-the-file-test-only\nCONDUIT_TEST_FROM_FILE=file\n")
    # SECRET_KEY comes from the file: without it manage.py could not start at all.
    assert run(env_file) == "file"
    # The environment always wins over the file.
    assert run(env_file, CONDUIT_TEST_FROM_FILE="environment", SECRET_KEY="x") == "environment"


def test_without_the_file_nothing_is_read(tmp_path):
    assert run(tmp_path / "missing.env", SECRET_KEY="x") == "-"
