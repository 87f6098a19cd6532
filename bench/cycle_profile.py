"""``bench/approval_cycle.py --trace``: a small profiler of per-phase wall time of named operations
(SQL statement, transaction begin/commit, saver call, aget_state), exclusive of the operations
nested inside them."""

from __future__ import annotations

import contextvars
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Frame:
    label: str
    child: float = 0.0


_stack: contextvars.ContextVar[tuple[_Frame, ...]] = contextvars.ContextVar("stack", default=())
_phase: contextvars.ContextVar[str] = contextvars.ContextVar("phase", default="-")


@dataclass
class Profile:
    enabled: bool = False
    ops: dict[tuple[str, str], list[float]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0.0])
    )
    phases: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def reset(self) -> None:
        self.ops.clear()
        self.phases.clear()

    async def timed(self, label: str, awaitable: Awaitable[Any]) -> Any:
        if not self.enabled:
            return await awaitable
        frame = _Frame(label)
        token = _stack.set((*_stack.get(), frame))
        t0 = time.perf_counter()
        try:
            return await awaitable
        finally:
            elapsed = time.perf_counter() - t0
            _stack.reset(token)
            self._record(label, elapsed, elapsed - frame.child)

    def _record(self, label: str, elapsed: float, exclusive: float) -> None:
        parents = _stack.get()
        if parents:
            parents[-1].child += elapsed
        entry = self.ops[(_phase.get(), label)]
        entry[0] += 1
        entry[1] += exclusive

    def wrap(self, obj: Any, method: str, label: Callable[..., str]) -> None:
        original = getattr(obj, method)

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.timed(label(*args, **kwargs), original(*args, **kwargs))

        setattr(obj, method, wrapper)

    def wrap_cm(self, obj: Any, method: str, label: str) -> None:
        """Time entering (pool acquire + BEGIN) and leaving (COMMIT + release) separately."""
        original = getattr(obj, method)
        profile = self

        @asynccontextmanager
        async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            cm = original(*args, **kwargs)
            value = await profile.timed(f"{label} enter", cm.__aenter__())
            try:
                yield value
            except BaseException as exc:
                if not await profile.timed(
                    f"{label} exit", cm.__aexit__(type(exc), exc, exc.__traceback__)
                ):
                    raise
            else:
                await profile.timed(f"{label} exit", cm.__aexit__(None, None, None))

        setattr(obj, method, wrapper)


PROFILE = Profile()


@asynccontextmanager
async def phase(name: str) -> AsyncIterator[None]:
    token = _phase.set(name)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        PROFILE.phases[name] += time.perf_counter() - t0
        _phase.reset(token)


def instrument(engine: Any, graph: Any, bare: Any) -> None:
    """Patch instances (never classes) so every DB round trip of both variants is timed."""
    db = engine._db  # its own round trips are what the benchmark times
    PROFILE.wrap(db, "one", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap(db, "all", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap(db, "run", lambda name, *a, **k: f"sql {name}")
    PROFILE.wrap_cm(db, "transaction", "tx")
    saver = graph.checkpointer
    for method in ("aget_tuple", "aput", "aput_writes"):
        PROFILE.wrap(saver, method, lambda *a, _m=method, **k: f"saver {_m}")
    PROFILE.wrap(graph, "aget_state", lambda *a, **k: "aget_state (python)")
    PROFILE.wrap(bare, "aget_state", lambda *a, **k: "aget_state (python)")


def trace_summary(cycles: int) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    for name, total in PROFILE.phases.items():
        ops = {
            label: {"per_cycle": round(n / cycles, 2), "ms_per_cycle": round(t / cycles * 1000, 3)}
            for (p, label), (n, t) in sorted(PROFILE.ops.items(), key=lambda kv: -kv[1][1])
            if p == name
        }
        phases[name] = {"ms_per_cycle": round(total / cycles * 1000, 3), "ops": ops}
    return phases
