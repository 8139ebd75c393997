"""scripts/test-tools: `make test` names what it lacks and stops, instead of a suite that cannot pass."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_as_a_user(path_dir: Path) -> subprocess.CompletedProcess:
    command = ["bash", str(ROOT / "scripts" / "test-tools")]
    env = {"PATH": str(path_dir), "HOME": "/tmp"}
    if os.getuid() == 0:  # as root it would install: run it as an unprivileged user
        command = [
            shutil.which("runuser"),
            "-u",
            "nobody",
            "--",
            "/usr/bin/env",
            f"PATH={path_dir}",
            *command,
        ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_a_missing_program_is_named_by_its_package_and_nothing_runs():
    # Outside pytest's tmp_path, whose parents only root may enter.
    bin_dir = Path(tempfile.mkdtemp(prefix="conduit-test-tools-"))
    for tool in ("ls", "id", "bash"):  # what the script itself runs; no promtool, no redis-server
        (bin_dir / tool).symlink_to(shutil.which(tool))
    bin_dir.chmod(0o755)
    try:
        result = run_as_a_user(bin_dir)
    finally:
        shutil.rmtree(bin_dir)
    assert result.returncode == 1, result.stderr
    assert "missing Debian packages: " in result.stderr
    named = result.stderr.split("missing Debian packages: ", 1)[1].splitlines()[0].split()
    assert "prometheus" in named and "redis-server" in named
    assert "installing" not in result.stderr


def test_with_every_program_present_it_passes_silently():
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test-tools")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
