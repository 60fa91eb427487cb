#!/usr/bin/env python3
"""Runs every example command of docs/api.md as written and checks each.

Every command line of docs/api.md's ```sh blocks (a trailing backslash
joins a line to the next) runs with `bash -e -o pipefail -c` exactly as
the docs write it, in a scratch directory holding `vm.json` (a copy of
docs/examples/vm.json) and `policy.json` (a policy this script writes),
with only the environment set: `S` (the docs' socket) and
`TIERVISOR_API_SOCKET` name `<scratch>/api.sock`, on which a live
`tiervisor serve` answers. A command passes when it exits 0, and:

* curl: `curl` on PATH is a shim that runs the real curl with
  `--fail-with-body -sS -w '%{stderr}...HTTP <code>'` added, so an HTTP
  error fails the line (exit 22, its error body shown) and the status of
  every request reaches stderr, where it must be 2xx; a 200 from
  `/api/v1/` must be JSON, a 204 empty. The line itself is untouched.
* expected output: `# ...` lines right after a command (no blank line
  between) are what it prints. Values (times, sizes, pids, paths) may
  differ, the shape may not: the same number of lines, blank where the
  docs' are, and each line's first word (digits masked) the same, a
  header line (all words in capitals) all of it.
* `tierctl frames --svg FILE` must write an SVG document to FILE.

Each command runs in the VM state it applies in, its examples in the
docs' order: the script deletes, creates or boots the VM (with tierctl)
before a command that needs no VM (`vm.create`, `tierctl create`), a
created one (`vm.boot`, `tierctl boot`) or, by default, a running one.
A block that starts with `export` is a script whose lines share their
shell: it runs whole. `vmm.shutdown` commands end a server, so they run
last: the first ends the main server (which must exit 0 and have printed
its VM's report, `vm ID:`), the next ones the other servers of the
first block.

The first block's servers use paths this script cannot: it runs them
with /run/tiervisor/vm0.sock, /etc/tiervisor/vm0.token and
127.0.0.1:8080 replaced by the scratch socket, a scratch token file and
a free loopback port (so does the last block's `export` line). A
`tiervisor serve` passes when it answers (`tierctl ping`, on TCP too
with its token) and exits 0 at `vmm.shutdown`; `tiervisor run` when it
answers while its VM runs and exits 0 at the VM's end. Everything else
not run as written is in EXCEPTIONS (and `jq`'s line of the last block
where jq is not installed: Debian does not install it by default), and
printed. Every wait is bounded by a deadline that only a hang reaches.

The binaries are taken from PATH (the test command puts the ones
scripts/install.sh installed first); curl must be installed.

Usage: scripts/api-examples.py [BIN_DIR]
"""

import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from installed_bins import env_with_bins

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/api.md"
TIMEOUT_S = 120  # one command; only a hang reaches it
DEADLINE_S = 60  # a server answering, a server exiting, a --watch table
CURL_MARK = "[api-examples curl] HTTP "

# Commands not run as written, each with why and what is done instead.
EXCEPTIONS = [
    (r"^UPDATE_OPENAPI=1 cargo test",
     "not run: it rewrites the committed api/openapi.json and builds the api "
     "crate's tests; the cargo test stage runs the same test, comparing"),
    (r"^tierctl stats --watch",
     "runs until Ctrl-C: run until it has printed two tables, then sent SIGINT"),
]
# The first block's host paths and port, and what runs instead.
DOC_SOCKET = "/run/tiervisor/vm0.sock"
DOC_TOKEN = "/etc/tiervisor/vm0.token"
DOC_TCP = "127.0.0.1:8080"


def say(line: str) -> None:
    print(f"[api-examples] {line}", flush=True)


class Example:
    """One command of the docs (or a whole script block)."""

    def __init__(self, text: str, line: int, expected=None, script=False):
        self.text = text  # as written, continuation lines included
        self.line = line  # in docs/api.md
        self.expected = expected  # the `# ...` lines after it, or None
        self.script = script
        self.display = re.sub(r"\\\n\s*", "", text) if not script else text

    def lines(self) -> list:
        return re.sub(r"\\\n\s*", "", self.text).split("\n") if self.script \
            else [self.display]


def examples() -> list:
    """Every command of the ```sh blocks of docs/api.md, in order."""
    text = DOC.read_text()
    found = []
    for block in re.finditer(r"^```sh\n(.*?)^```", text, re.S | re.M):
        first = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        cmds, i = [], 0
        while i < len(lines):
            line = lines[i]
            if not line.strip() or line.startswith("#"):
                i += 1
                continue
            start, cmd = i, line
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd += "\n" + lines[i]
            i += 1
            expected = []
            while i < len(lines) and lines[i].startswith("#"):
                expected.append(re.sub(r"^# ?", "", lines[i]))
                i += 1
            cmds.append(Example(cmd, first + start, expected or None))
        if cmds and cmds[0].text.startswith("export "):
            body = "\n".join(c.text for c in cmds)
            found.append(Example(body, cmds[0].line, script=True))
        else:
            found.extend(cmds)
    return found


def shape(line: str) -> str:
    words = line.split()
    if not words:
        return ""
    if all(re.fullmatch(r"[A-Z]+", w) for w in words):
        return " ".join(words)
    return re.sub(r"\d+", "#", words[0])


def shape_mismatch(expected: list, out: str):
    got = out.rstrip("\n").split("\n")
    if len(got) != len(expected):
        return f"{len(got)} lines printed, the docs show {len(expected)}"
    for n, (want, have) in enumerate(zip(expected, got), 1):
        if shape(want) != shape(have):
            return f"line {n}: the docs show {want!r}, it printed {have!r}"
    return None


class Failed(Exception):
    pass


class Harness:
    def __init__(self, scratch: pathlib.Path, env: dict):
        self.scratch = scratch
        self.env = env
        self.sock = scratch / "api.sock"
        self.token = scratch / "vm0.token"
        self.port = free_port()
        self.procs = []  # every server started, for cleanup
        self.failures = 0
        self.vm_id = json.loads((scratch / "vm.json").read_text())["id"]

    # Running commands.

    def subst(self, text: str) -> str:
        return (text.replace(DOC_SOCKET, str(self.sock))
                .replace(DOC_TOKEN, str(self.token))
                .replace(DOC_TCP, f"127.0.0.1:{self.port}"))

    def bash(self, text: str, timeout=TIMEOUT_S):
        try:
            return subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", self.subst(text)],
                cwd=self.scratch, env=self.env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed(f"did not finish in {timeout} s")

    def tierctl(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run(["tierctl", *args], cwd=self.scratch, env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT_S)

    def must(self, *args) -> None:
        r = self.tierctl(*args)
        if r.returncode != 0:
            raise Failed(f"preparing the VM: `tierctl {' '.join(args)}` failed: {r.stdout.strip()}")

    def start(self, text: str, log: str) -> subprocess.Popen:
        out = open(self.scratch / log, "w")
        proc = subprocess.Popen(["bash", "-c", self.subst(text)], cwd=self.scratch,
                                env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def log_tail(self, log: str, n=15) -> str:
        return "\n".join((self.scratch / log).read_text().splitlines()[-n:])

    def answers(self, proc, tcp=False) -> bool:
        """Polls until the server answers (True) or exits (False)."""
        probe = ["--api-tcp", f"127.0.0.1:{self.port}", "--token-file", str(self.token)] \
            if tcp else []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if self.tierctl(*probe, "ping").returncode == 0:
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.1)
        raise Failed(f"did not answer `tierctl ping` within {DEADLINE_S} s")

    # The VM's state.

    def state(self):
        r = self.tierctl("--json", "info")
        return json.loads(r.stdout)["state"] if r.returncode == 0 else None

    def idle(self) -> None:
        """Waits until no tier measurement (vm.tiers.measure) runs: the
        next example may start one, and only one runs at a time."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            r = self.tierctl("--json", "info")
            if r.returncode != 0 or not json.loads(r.stdout).get("measuring_tiers"):
                return
            time.sleep(0.1)
        raise Failed(f"a tier measurement ran longer than {DEADLINE_S} s")

    def ensure(self, need: str) -> None:
        if need == "any":
            return
        self.idle()
        state = self.state()
        if need == "none":
            if state:
                self.must("delete")
            return
        if need == "created" and state != "created":
            if state:
                self.must("delete")
            self.must("create", "vm.json")
            return
        if need == "running":
            if state == "paused":
                self.must("resume")
            elif state in (None, "shutdown"):
                if state:
                    self.must("delete")
                self.must("create", "vm.json")
                state = "created"
            if state == "created":
                self.must("boot")

    # Reporting.

    def ok(self, ex: Example, note: str = "") -> None:
        for line in ex.lines():
            say(f"ok   {line}" + (f"   [{note}]" if note else ""))

    def fail(self, ex: Example, reason: str, output: str = "") -> None:
        self.failures += 1
        say(f"FAIL {ex.display}   (docs/api.md:{ex.line})")
        say(f"     {reason}")
        for line in output.rstrip("\n").split("\n") if output.strip() else []:
            print(f"         | {line}", flush=True)

    # Kinds of example.

    def api(self, ex: Example, report=True) -> None:
        """A command against the main server, in the state it needs."""
        if re.search(r"vmm\.shutdown|shutdown-vmm", ex.display):
            need = "any"
        elif re.search(r"vm\.create|tierctl create", ex.display):
            need = "none"
        elif re.search(r"vm\.boot|^tierctl boot", ex.display):
            need = "created"
        else:
            need = "running"
        self.ensure(need)
        if re.match(r"tierctl stats --watch", ex.display):
            return self.watch(ex)
        r = self.bash(ex.text)
        codes = [int(c) for c in re.findall(re.escape(CURL_MARK) + r"(\d+)", r.stderr)]
        err = "\n".join(l for l in r.stderr.splitlines() if not l.startswith(CURL_MARK))
        shown = r.stdout + ("\n" if err and r.stdout and not r.stdout.endswith("\n") else "") + err
        if r.returncode != 0:
            raise Failed(f"exit {r.returncode}" + (f", HTTP {codes}" if codes else ""), shown)
        if re.search(r"(^|[;&|]\s*)curl ", ex.display):
            if not codes or any(not 200 <= c < 300 for c in codes):
                raise Failed(f"HTTP status {codes or 'not reported'}, not 2xx", shown)
            if codes == [200] and "/api/v1/" in ex.display:
                try:
                    json.loads(r.stdout)
                except ValueError as e:
                    raise Failed(f"HTTP 200 without a JSON body: {e}", shown)
            if codes == [204] and r.stdout:
                raise Failed("HTTP 204 with a body", shown)
        if ex.expected:
            bad = shape_mismatch(ex.expected, r.stdout)
            if bad:
                want = "\n".join(f"# {l}".rstrip() for l in ex.expected)
                raise Failed(f"output differs from the docs' ({bad})",
                             f"{r.stdout.rstrip()}\n--- the docs show:\n{want}")
        svg = re.search(r"--svg (\S+)", ex.display)
        if svg:
            path = self.scratch / svg.group(1)
            body = path.read_text() if path.exists() else ""
            if "<svg" not in body or not body.rstrip().endswith("</svg>"):
                raise Failed(f"{svg.group(1)} is not an SVG document", shown)
            note = f"{svg.group(1)}: an SVG of {len(body)} bytes"
        elif ex.expected:
            note = "printed the docs' shape"
        elif codes:
            note = "HTTP " + ", ".join(map(str, codes))
        else:
            note = ""
        if report:
            self.ok(ex, note)
        return note

    def watch(self, ex: Example) -> None:
        """Runs `--watch` until it has printed two tables, then Ctrl-C."""
        proc = subprocess.Popen(["bash", "-c", ex.text], cwd=self.scratch, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + DEADLINE_S
        tables = lambda: sum(l.startswith("tiering engine of") for l in list(lines))
        while tables() < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        early = proc.poll()
        if early is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(10)
        if tables() < 2:
            why = f"exited {early}" if early is not None else f"in {DEADLINE_S} s"
            raise Failed(f"printed {tables()} tables ({why}), not 2", "".join(lines[-20:]))
        self.ok(ex, f"{tables()} tables, then SIGINT")

    def script(self, ex: Example) -> None:
        """A block whose lines share a shell: run whole, with no VM yet."""
        self.ensure("none" if "tierctl create" in ex.text else "running")
        text = ex.text
        if not shutil.which("jq", path=self.env["PATH"]):  # listed in the exceptions
            text = "\n".join(l for l in text.split("\n") if not re.search(r"\bjq\b", l))
            ex = Example(text, ex.line, script=True)
        r = self.bash("set -x\n" + text)
        if r.returncode != 0:
            raise Failed(f"the block failed (exit {r.returncode}; `+` lines trace it)",
                         r.stdout + r.stderr)
        if self.state() != "running":
            raise Failed(f"the block left the VM {self.state()}, not running",
                         r.stdout + r.stderr)
        self.ok(ex)

    def ends_server(self, ex: Example, proc, log: str, served_vm: bool) -> None:
        """Runs a vmm.shutdown example; the server must exit 0."""
        note = self.api(ex, report=False)
        try:
            rc = proc.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"the server still runs {DEADLINE_S} s after it", self.log_tail(log))
        if rc != 0:
            raise Failed(f"the server exited {rc}", self.log_tail(log))
        if served_vm and f"vm {self.vm_id}:" not in (self.scratch / log).read_text():
            raise Failed(f"the server printed no `vm {self.vm_id}:` report", self.log_tail(log))
        if self.sock.exists():
            raise Failed(f"the server left {self.sock} behind")
        self.ok(ex, f"{note}; the server exited 0" if note else "the server exited 0")
        return True

    def serve(self, ex: Example, log: str):
        proc = self.start(ex.text, log)
        tcp = "--api-tcp" in ex.text
        if not self.answers(proc) or (tcp and not self.answers(proc, tcp=True)):
            raise Failed(f"exited {proc.wait()} before answering", self.log_tail(log))
        return proc

    def run_vm(self, ex: Example) -> None:
        """`tiervisor run`: answers while its VM runs, exits 0 at its end."""
        proc = self.start(ex.text, "run.log")
        answered = self.answers(proc)
        try:
            rc = proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"its VM did not end in {TIMEOUT_S} s", self.log_tail("run.log"))
        if rc != 0 or not answered:
            raise Failed(f"exited {rc}" + ("" if answered else " without answering"),
                         self.log_tail("run.log"))
        self.ok(ex, f"as {self.subst(ex.display).split()[-1]}: answered, its VM ended, exit 0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    started = time.monotonic()
    env = env_with_bins(sys.argv, "api-examples")
    curl = shutil.which("curl", path=env["PATH"])
    if not curl:
        sys.exit("api-examples: curl is not installed; docs/api.md's examples use it")

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="tv-api-examples-"))
    shim = scratch / "shim"
    shim.mkdir()
    (shim / "curl").write_text(
        "#!/bin/sh\n"
        f"exec {curl} --fail-with-body -sS -w '%{{stderr}}{CURL_MARK}%{{http_code}}\\n' \"$@\"\n")
    (shim / "curl").chmod(0o755)
    shutil.copy(ROOT / "docs/examples/vm.json", scratch / "vm.json")
    (scratch / "policy.json").write_text(
        json.dumps({"fast_quota": {"max_bytes": 268435456}, "promote_rate_mbps": 256}) + "\n")
    token = scratch / "vm0.token"
    token.write_text(secrets.token_hex(16) + "\n")
    token.chmod(0o600)
    env.update(PATH=f"{shim}:{env['PATH']}", S=str(scratch / "api.sock"),
               TIERVISOR_API_SOCKET=str(scratch / "api.sock"), PS4="+ ")
    h = Harness(scratch, env)

    all_examples = examples()
    say(f"{len(all_examples)} examples in docs/api.md; scratch directory {scratch}")
    say("exceptions (not run as written):")
    for pattern, why in EXCEPTIONS:
        hits = [e.display for e in all_examples if re.search(pattern, e.display)]
        for hit in hits or [f"(no example matches /{pattern}/)"]:
            say(f"  {hit}: {why}")
    say(f"  {DOC_SOCKET}, {DOC_TOKEN}, {DOC_TCP} (first and last blocks): "
        f"replaced by {h.sock}, {h.token}, 127.0.0.1:{h.port}; the servers need root "
        "for those paths, and the port may be taken")
    if not shutil.which("jq", path=env["PATH"]):
        for ex in all_examples:
            for line in ex.lines() if ex.script else []:
                if re.search(r"\bjq\b", line):
                    say(f"  {line}: not run, jq is not installed (Debian does not install "
                        "it by default); the rest of its block runs")

    servers, enders, rest = [], [], []
    for ex in all_examples:
        if re.match(r"tiervisor (serve|run)\b", ex.display):
            servers.append(ex)
        elif re.search(r"vmm\.shutdown|shutdown-vmm", ex.display):
            enders.append(ex)
        else:
            rest.append(ex)
    exceptions = [e for e in rest if re.match(EXCEPTIONS[0][0], e.display)]
    rest = [e for e in rest if e not in exceptions]
    serves = [e for e in servers if e.display.startswith("tiervisor serve")]
    if not serves:
        sys.exit("api-examples: docs/api.md has no `tiervisor serve` example to serve the others")

    def attempt(ex, fn, *args):
        try:
            return fn(ex, *args)
        except Failed as e:
            h.fail(ex, *e.args)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            h.fail(ex, f"{type(e).__name__}: {e}")

    try:
        main_serve = serves[0]
        proc = attempt(main_serve, h.serve, "serve.log")
        if proc:
            for ex in rest:
                attempt(ex, h.script if ex.script else h.api)
            pending = list(enders)
            ender = pending.pop(0) if pending else None
            if ender and attempt(ender, h.ends_server, proc, "serve.log", True):
                h.ok(main_serve, f"as {h.sock}: answered, exited 0 at vmm.shutdown")
            elif not ender:
                h.fail(main_serve, "no vmm.shutdown example to end it")
            for ex in servers:
                if ex is main_serve:
                    continue
                if ex.display.startswith("tiervisor run"):
                    attempt(ex, h.run_vm)
                    continue
                log = f"serve-{ex.line}.log"
                proc = attempt(ex, h.serve, log)
                if not proc:
                    continue
                ender = pending.pop(0) if pending else Example("tierctl shutdown-vmm", 0)
                if attempt(ender, h.ends_server, proc, log, False):
                    h.ok(ex, "answered on the socket and TCP with its token, exited 0")
            for ex in pending:  # more shutdown examples than servers: a fresh one each
                proc = attempt(main_serve, h.serve, "serve-extra.log")
                if proc:
                    attempt(ex, h.ends_server, proc, "serve-extra.log", False)
    finally:
        for proc in h.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    took = time.monotonic() - started
    if h.failures:
        say(f"{h.failures} example(s) FAILED ({took:.0f} s); scratch directory kept: {scratch}")
        return 1
    shutil.rmtree(scratch)
    say(f"every example of docs/api.md passed but the exceptions above ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
