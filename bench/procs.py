"""Child processes of the benchmark: started in their own process group, always stopped.

Invariant: every process started through `Processes.start` is in the registry
until it has exited, and `Processes.stop_all` (called from a `finally`, also on
Ctrl-C) signals each one's whole group — SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_seconds(self) -> float:
        """User + system CPU time so far (from /proc/<pid>/stat)."""
        with open(f"/proc/{self.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def peak_rss_mb(self) -> float:
        """VmHWM: the most resident memory the process has had."""
        with open(f"/proc/{self.pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def tail(self, lines: int = 20) -> str:
        with open(self.log_path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])


class Processes:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.children: list[Child] = []

    def start(
        self, name: str, args: list[str], env: dict[str, str] | None = None, root: Path = ROOT
    ) -> Child:
        """Start `python <args>` with `root` importable, from a scratch directory (no `.env`)."""
        log_path = self.workdir / f"{name}.log"
        full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(root)}
        log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
        popen = subprocess.Popen(
            [sys.executable, *args],
            cwd=self.workdir,
            env=full_env,
            stdout=subprocess.PIPE if name.startswith("fake") else log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        child = Child(name, popen, log_path)
        self.children.append(child)
        return child

    def port_of(self, child: Child, timeout: float = 15.0) -> int:
        """Read the `PORT <n>` line a fake prints once it listens."""
        assert child.popen.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = child.popen.stdout.readline().decode()
            if line.startswith("PORT "):
                return int(line.split()[1])
            if not line and child.popen.poll() is not None:
                break
        raise RuntimeError(f"{child.name} did not start:\n{child.tail()}")

    def stop(self, child: Child, grace: float = 5.0) -> None:
        if child.popen.poll() is None:
            _signal_group(child.pid, signal.SIGTERM)
            try:
                child.popen.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.popen.wait(grace)
        if child.popen.stdout is not None:
            child.popen.stdout.close()
        if child in self.children:
            self.children.remove(child)

    def stop_all(self) -> None:
        for child in reversed(list(self.children)):
            try:
                self.stop(child, grace=3.0)
            except Exception as exc:  # keep stopping the others
                print(f"could not stop {child.name}: {exc}", file=sys.stderr)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
