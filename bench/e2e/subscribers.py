"""The harness side of the subscriber processes (bench/e2e/subscriber.py): start n of them,
wait until every one is subscribed, learn when each holds a whole phase, collect their
records, and stop them by pid whatever happened."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

READY_TIMEOUT = 180.0
STOP_TIMEOUT = 5.0


class SubscriberError(RuntimeError):
    pass


class Worker:
    def __init__(self, index: int, argv: list[str], workdir: Path, changed: asyncio.Event) -> None:
        self.index = index
        self.argv = argv
        self.out = workdir / f"sub-{index:02d}.json"
        self.log = workdir / f"sub-{index:02d}.log"
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.dumped = asyncio.Event()
        self.complete: dict[str, int] = {}
        self.changed = changed  # shared by the group: set on every line and on exit
        self.exited = False
        self.stopping = False
        self.errors: list[str] = []
        self.reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.e2e.subscriber", *self.argv, "--out", str(self.out),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                start_new_session=True,
            )
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while True:
            line = (await self.process.stdout.readline()).decode().strip()
            if not line:
                code = await self.process.wait()
                if not (self.stopping and code == 0):
                    self.errors.append(f"exited ({code}): {self.log_tail()}")
                self.exited = True
                self.changed.set()
                self.ready.set()
                self.dumped.set()
                return
            word, _, rest = line.partition(" ")
            if word == "ready":
                self.ready.set()
            elif word == "complete":
                phase, _, ns = rest.partition(" ")
                self.complete[phase] = int(ns)
            elif word == "dumped":
                self.dumped.set()
            elif word == "error":
                self.errors.append(rest)
            self.changed.set()

    def log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-3:])

    def send(self, command: str) -> None:
        if self.process is not None and self.process.stdin is not None and not self.process.stdin.is_closing():
            with contextlib.suppress(ConnectionError, OSError):
                self.process.stdin.write(command.encode() + b"\n")

    async def stop(self) -> None:
        process = self.process
        if process is None:
            return
        if process.returncode is None:
            self.stopping = True
            self.send("quit")
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                await process.wait()
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)


class Subscribers:
    """n subscriber processes; ``async with`` starts them (subscribed) and stops them."""

    def __init__(self, argvs: list[list[str]], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.changed = asyncio.Event()
        self.workers = [Worker(i, argv, workdir, self.changed) for i, argv in enumerate(argvs)]

    @property
    def pids(self) -> dict[str, int]:
        return {f"sub-{w.index:02d}": w.pid for w in self.workers if w.process is not None}

    async def __aenter__(self) -> Subscribers:
        try:
            for worker in self.workers:
                await worker.start()
            async with asyncio.timeout(READY_TIMEOUT):
                await asyncio.gather(*(w.ready.wait() for w in self.workers))
        except TimeoutError:
            await self.stop()
            late = [w.index for w in self.workers if not w.ready.is_set()]
            raise SubscriberError(f"subscribers {late} not ready within {READY_TIMEOUT:g} s") from None
        except BaseException:
            await self.stop()
            raise
        failed = [f"subscriber {w.index}: {w.errors[0]}" for w in self.workers if w.errors]
        if failed:
            await self.stop()
            raise SubscriberError("; ".join(failed[:3]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)

    def errors(self) -> list[str]:
        return [f"subscriber {w.index}: {e}" for w in self.workers for e in w.errors]

    async def wait_complete(self, phase: str, timeout: float) -> dict[int, int] | None:
        """Receipt time of the last publication of `phase` at each subscriber that holds the
        whole phase, once all do or `timeout` passed (then None for the missing ones)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    self.changed.clear()
                    if all(phase in w.complete or w.exited for w in self.workers):
                        break
                    await self.changed.wait()
        if all(phase in w.complete for w in self.workers):
            return {w.index: w.complete[phase] for w in self.workers}
        return None

    async def dump(self, timeout: float = 30.0) -> list[dict[str, Any] | None]:
        """Every subscriber's records (bench/e2e/subscriber.py, `Recorder.dump`); None for a
        subscriber that exited or did not answer within `timeout`."""
        for worker in self.workers:
            worker.out.unlink(missing_ok=True)
            if not worker.exited:
                worker.dumped.clear()
                worker.send("dump")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(w.dumped.wait() for w in self.workers))
        out: list[dict[str, Any] | None] = []
        for worker in self.workers:
            try:
                out.append(json.loads(worker.out.read_text()))
            except (OSError, ValueError):
                out.append(None)
        return out
