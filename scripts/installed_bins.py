"""The environment the docs' scripts (walkthrough.py, api-examples.py) run
commands in: PATH with BIN_DIR (their optional argument) first, checked to
hold tiervisor and tierctl."""

import os
import pathlib
import shutil
import sys


def env_with_bins(argv: list, who: str) -> dict:
    """A copy of the environment with argv[1] (if given) first on PATH;
    exits naming `who` when tiervisor or tierctl is not on it."""
    env = dict(os.environ)
    if len(argv) > 1:
        env["PATH"] = f"{pathlib.Path(argv[1]).resolve()}:{env['PATH']}"
    for binary in ("tiervisor", "tierctl"):
        if not shutil.which(binary, path=env["PATH"]):
            sys.exit(f"{who}: {binary} is not on PATH (scripts/install.sh)")
    return env
