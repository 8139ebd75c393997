"""The suite runs on what it sets: a developer's `.demo.env` beside manage.py is never read."""

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def test_the_test_run_names_no_env_file():
    # make test names none; the suite's conftest sets the same for every process a test starts.
    assert settings.ENV_FILE in (None, Path(os.devnull))
    assert os.environ["CONDUIT_ENV_FILE"] == os.devnull


def test_only_manage_py_reads_the_demo_env_by_default():
    """Settings imported by a process other than manage.py (gunicorn, pytest) read no env file."""
    env = {k: v for k, v in os.environ.items() if k != "CONDUIT_ENV_FILE"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.ENV_FILE)"
    settings_alone = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "DJANGO_SETTINGS_MODULE": "conduit.settings"},
    )
    assert settings_alone.returncode == 0, settings_alone.stderr[-2000:]
    assert settings_alone.stdout.strip() == "None"
    through_manage = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.conf import settings; print(settings.ENV_FILE)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert through_manage.returncode == 0, through_manage.stderr[-2000:]
    assert through_manage.stdout.strip().splitlines()[-1] == str(ROOT / ".demo.env")
