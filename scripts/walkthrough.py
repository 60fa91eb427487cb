#!/usr/bin/env python3
"""Runs the README's API walkthrough and zipf example as written and
checks each step.

The block after `<!-- walkthrough: README -->` in README.md runs with
`bash -e` in a scratch directory holding `docs/examples/vm.json`, which
must equal docs/api.md's `vm.create` example (the block after
`<!-- walkthrough: vm.json -->`). The binaries are taken from PATH (the
test command puts the ones scripts/install.sh installed first). Fails,
naming the step, when the block fails or a step's output is not what the
docs show.

The README's zipf example (the block after `<!-- walkthrough: zipf -->`)
runs the same way after it: it must end well, write its JSON report and
warn that the tiers read alike (both are memfd in the same DRAM). Last,
the README's demo (`<!-- walkthrough: demo -->`, a `cargo run --release`)
runs as written in the checkout and must end well.

Usage: scripts/walkthrough.py [BIN_DIR]
"""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from installed_bins import env_with_bins

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT_S = 300
# The demo builds the release binary first: minutes on 2 cores.
DEMO_TIMEOUT_S = 1800


def block(path: pathlib.Path, marker: str, lang: str) -> str:
    text = path.read_text()
    at = text.find(f"<!-- walkthrough: {marker} -->")
    if at < 0:
        sys.exit(f"walkthrough: no '{marker}' marker in {path}")
    match = re.compile(rf"```{lang}\n(.*?)```", re.S).search(text, at)
    if not match:
        sys.exit(f"walkthrough: no ```{lang} block after '{marker}' in {path}")
    return match.group(1)


def run_readme_block(marker: str, what: str, cwd, env, timeout: int, patterns: list):
    """Runs the README block after `marker` as written in `cwd`; its
    output (None when it timed out) and what is wrong with it: a non-zero
    exit or a missing pattern."""
    script = block(ROOT / "README.md", marker, "sh")
    print(f"[walkthrough] running README's {what}", file=sys.stderr)
    try:
        run = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, [f"the {what} did not finish in {timeout} s"]
    print(run.stdout[-3000:])
    failures = []
    if run.returncode != 0:
        failures.append(f"the {what} failed (exit {run.returncode})")
    for pattern in patterns:
        if not re.search(pattern, run.stdout):
            failures.append(f"the {what}: expected /{pattern}/")
    return run.stdout, failures


def zipf_example(env: dict, scratch: pathlib.Path) -> list:
    """Runs the README's zipf example as written in `scratch`; what is
    wrong with what it did."""
    out, failures = run_readme_block("zipf", "zipf example", scratch, env, TIMEOUT_S, [
        r"result: guest exited successfully",
        r"warning: the tiers read alike",
        r"engine cost: .* reads at ~\d+ ns",
    ])
    if out is None:
        return failures
    try:
        report = json.loads((scratch / "report.json").read_text())
        if report["end"]["kind"] != "success":
            failures.append(f"the zipf example's report ends {report['end']}")
    except (OSError, ValueError, KeyError) as e:
        failures.append(f"the zipf example wrote no readable report.json: {e}")
    return failures


def demo() -> list:
    """Runs the README's demo as written in the checkout (it builds the
    release binary first); what is wrong with what it did."""
    return run_readme_block("demo", "demo", ROOT, None, DEMO_TIMEOUT_S, [
        r"result: guest exited successfully",
        r"placement check: ok",
    ])[1]


def main() -> int:
    env = env_with_bins(sys.argv, "walkthrough")

    example = block(ROOT / "docs/api.md", "vm.json", "json")
    committed = (ROOT / "docs/examples/vm.json").read_text()
    if json.loads(example) != json.loads(committed):
        sys.exit("walkthrough: docs/examples/vm.json differs from docs/api.md's example")
    script = block(ROOT / "README.md", "README", "sh")

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="tv-walkthrough-"))
    (scratch / "docs/examples").mkdir(parents=True)
    (scratch / "docs/examples/vm.json").write_text(committed)
    # Each command echoed before it runs, so the output can be split by step.
    traced = "set -x\n" + script
    print(f"[walkthrough] running README's block in {scratch}", file=sys.stderr)
    try:
        run = subprocess.run(
            ["bash", "-e", "-c", traced],
            cwd=scratch,
            env=dict(env, PS4="+STEP "),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        print(out if isinstance(out, str) else out.decode(errors="replace"))
        print(f"walkthrough: the block did not finish in {TIMEOUT_S} s", file=sys.stderr)
        subprocess.run(["pkill", "-f", "tiervisor serve --api-socket /tmp/tv.sock"])
        return 1
    out = run.stdout
    print(out)
    if run.returncode != 0:
        print(f"walkthrough: the block failed (exit {run.returncode})", file=sys.stderr)
        return 1

    # What each step must print, as the docs show it.
    checks = [
        ("tierctl stats", r"tiering engine of web-1: \d+ intervals, tracker dirty-log"),
        ("tierctl stats", r"fast quota\s+256 MiB"),
        ("tierctl rebalance --fast-bytes", r"rebalance"),
        ("tierctl rebalance --status", r"rebalance\s+done: fast tier .* -> 128 MiB"),
        ("tiervisor serve", r"vm web-1:"),
        ("tiervisor serve", r"result: guest exited successfully"),
        ("tiervisor serve", r"placement check: ok"),
    ]
    failures = [
        f"after `{step}`: expected /{pattern}/" for step, pattern in checks
        if not re.search(pattern, out)
    ]
    svg = scratch / "heat.svg"
    if not (svg.exists() and svg.read_text().rstrip().endswith("</svg>")):
        failures.append("`tierctl frames --svg heat.svg` wrote no SVG")
    failures += zipf_example(env, scratch)
    failures += demo()
    for f in failures:
        print(f"walkthrough: {f}", file=sys.stderr)
    if not failures:
        shutil.rmtree(scratch)
        print("[walkthrough] every step printed what the docs show", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
