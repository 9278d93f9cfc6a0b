"""CLI fixtures: `torch-webgpu` in a subprocess with a private compile cache shared by the session."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).resolve().parent / "cli_models.py"


@pytest.fixture(scope="session")
def cli(cli_cache):
    """Run `python -m torch_webgpu ARGS...` in a subprocess; returns the CompletedProcess (text)."""
    # The repo first; a worktree run's own path entries after it (they keep its code importable).
    env = {**os.environ, "TORCH_WEBGPU_CACHE_DIR": str(cli_cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    def run(*args, check=True, timeout=300):
        proc = subprocess.run([sys.executable, "-m", "torch_webgpu", *map(str, args)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"torch-webgpu {' '.join(map(str, args))} exited {proc.returncode}:\n"
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return proc

    return run


@pytest.fixture
def main_cli(capsys, monkeypatch, cli_cache):
    """Run `torch-webgpu ARGS...` in this process (fast checks); returns (exit code, stdout, stderr)."""
    from torch_webgpu.cli.main import main

    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(cli_cache))

    def run(*args):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:   # argparse: --help and usage errors
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture(scope="session")
def cli_cache(tmp_path_factory):
    """The compile cache shared by the session's CLI runs."""
    return tmp_path_factory.mktemp("cli-compile-cache")


@pytest.fixture(scope="session")
def mlp_cli_bundle(cli, tmp_path_factory):
    """The MLP compiled once by the CLI for the portable webgpu-core target."""
    out = tmp_path_factory.mktemp("cli-bundles") / "mlp.bundle"
    cli("compile", f"{MODELS}:mlp", "--input", "4x16xf32", "--target", "webgpu-core", "-o", out, "-q")
    return out
