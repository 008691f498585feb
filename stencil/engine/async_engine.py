"""AsyncLLMEngine: the step loop in a background thread, per-request async streams, abort."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from stencil.engine.config import EngineConfig
from stencil.engine.errors import EngineError
from stencil.engine.llm_engine import LLMEngine
from stencil.engine.outputs import RequestOutput
from stencil.engine.sampling_params import SamplingParams

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue

    def put(self, item: RequestOutput | BaseException) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class AsyncLLMEngine:
    """Thread-safe front of an :class:`LLMEngine`; only the loop thread touches the engine."""

    def __init__(self, engine: LLMEngine, stall_timeout: float = 30.0) -> None:
        self.engine = engine
        self.stall_timeout = stall_timeout
        self._cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._wakeup = threading.Event()
        self._streams: dict[str, _Stream] = {}
        self._stop = False
        self._dead: BaseException | None = None
        self.last_step_time = time.monotonic()
        self._busy_since: float | None = None
        self._thread = threading.Thread(target=self._loop, name="stencil-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, config: EngineConfig) -> AsyncLLMEngine:
        return cls(LLMEngine(config))

    # ---- properties the server needs ---------------------------------------------------
    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def model_name(self) -> str:
        return self.engine.model_name

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def vocab_size(self) -> int:
        return self.engine.vocab_size

    @property
    def embedding_size(self) -> int:
        return int(self.engine.hf_config.hidden_size)

    @property
    def reasoning_end(self) -> str | None:
        return self.engine.config.reasoning_end

    # ---- requests ----------------------------------------------------------------------
    async def generate(
        self, prompt: str | list[int], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[RequestOutput]:
        """Stream cumulative outputs; raises RequestError / ConstraintError / QueueFullError
        before the first item. Closing the iterator early aborts the request."""
        async for out in self._stream(prompt, params, request_id, None):
            yield out

    async def embed(self, prompt: str | list[int], request_id: str | None = None) -> list[float]:
        """The L2-normalized pooled embedding of ``prompt`` (pooling per EngineConfig), computed
        in the continuous batch beside generation. Raises RequestError for bad input."""
        out = None
        stream = self._stream(
            prompt, SamplingParams(max_tokens=1), request_id, self.engine.config.pooling
        )
        async for item in stream:
            out = item
        if out is None or out.embedding is None:
            raise EngineError(f"embedding failed: {out.outputs[0].error if out else 'no output'}")
        return out.embedding

    async def _stream(
        self, prompt, params: SamplingParams, request_id: str | None, pooling: str | None
    ):
        self._check_alive()
        rid = request_id or uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        if params.constraint is not None:  # compile off the step loop; errors surface here as 400s
            await self._precompile(loop, params.constraint)
        stream = _Stream(loop, asyncio.Queue())
        added = loop.create_future()
        self._send(("add", rid, prompt, params, pooling, stream, added))
        try:
            await added
        except asyncio.CancelledError:  # cancelled while queued: the add still lands, so undo it
            self._send(("abort", rid))
            raise
        finished = False
        try:
            while not finished:
                item = await stream.queue.get()
                if isinstance(item, BaseException):
                    raise item
                finished = item.finished
                yield item
        finally:
            if not finished:
                self._send(("abort", rid))

    async def _precompile(self, loop: asyncio.AbstractEventLoop, constraint) -> None:
        """Compile in a thread (a worker process does the work); a caller that goes away
        meanwhile (disconnect, cancel) kills the compile instead of leaving it to its budget."""
        cancel = threading.Event()
        try:
            await loop.run_in_executor(None, self.engine.guided.compile, constraint, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    async def abort(self, request_id: str) -> None:
        self._send(("abort", request_id))

    def get_metrics(self) -> dict[str, float]:
        return self.engine.get_metrics()

    def is_healthy(self) -> bool:
        """The loop thread is alive and, when it has work, stepped within ``stall_timeout``."""
        if self._dead is not None or not self._thread.is_alive():
            return False
        busy = self._busy_since
        return (
            busy is None or time.monotonic() - max(busy, self.last_step_time) < self.stall_timeout
        )

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stop = True
        self._wakeup.set()
        self._thread.join(timeout)
        self.engine.shutdown()

    # ---- the loop thread ---------------------------------------------------------------
    def _send(self, cmd: tuple) -> None:
        self._cmds.put(cmd)
        self._wakeup.set()

    def _check_alive(self) -> None:
        if self._dead is not None or self._stop:
            raise EngineError("the engine is not running")

    def _loop(self) -> None:
        try:
            while not self._stop:
                self._drain()
                if not self.engine.has_unfinished_requests():
                    self._busy_since = None
                    self._wakeup.wait(0.5)
                    self._wakeup.clear()
                    continue
                self._busy_since = self._busy_since or time.monotonic()
                outs = self.engine.step()
                self.last_step_time = time.monotonic()
                self._deliver(outs)
                if not self.engine.scheduler.has_work():  # only compiles pending: don't spin
                    self._wakeup.wait(0.002)
                    self._wakeup.clear()
        except BaseException as e:  # the loop must never die silently
            logger.exception("engine loop died")
            self._dead = e
        self._fail_all(EngineError("the engine stopped"))

    def _drain(self) -> None:
        while True:
            try:
                cmd = self._cmds.get_nowait()
            except queue.Empty:
                return
            if cmd[0] == "add":
                self._add(*cmd[1:])
            else:
                out = self.engine.abort_request(cmd[1])
                stream = self._streams.pop(cmd[1], None)
                if stream is not None and out is not None:
                    stream.put(out)

    def _add(self, rid, prompt, params, pooling, stream: _Stream, added: asyncio.Future) -> None:
        try:
            self.engine.add_request(rid, prompt, params, pooling=pooling)
        except Exception as e:
            stream.loop.call_soon_threadsafe(_settle, added, e)
            return
        self._streams[rid] = stream
        stream.loop.call_soon_threadsafe(_settle, added, None)

    def _deliver(self, outs: list[RequestOutput]) -> None:
        for out in outs:
            stream = self._streams.get(out.request_id)
            if stream is None:
                continue
            stream.put(out)
            if out.finished:
                del self._streams[out.request_id]

    def _fail_all(self, error: BaseException) -> None:
        for stream in self._streams.values():
            stream.put(error)
        self._streams.clear()


def _settle(fut: asyncio.Future, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
