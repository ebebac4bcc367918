"""A buffering TCP proxy for tests: what the server sends is held until the server has been quiet for a moment,
then passed on in one write, as a buffering reverse proxy (nginx's `proxy_buffering`) or a loaded engine that
merges its pending outputs does. Each streamed answer then reaches the client in one read, so every content
chunk of it carries the same client timestamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from types import TracebackType


class BufferingProxy:
    """Listens on a free loopback port and forwards to `upstream_port`, holding server data for `quiet_s`."""

    def __init__(self, upstream_port: int, *, quiet_s: float = 0.05) -> None:
        self.upstream_port = upstream_port
        self.quiet_s = quiet_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="buffering-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> BufferingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _listen(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0, family=socket.AF_INET)
        self.port = int(server.sockets[0].getsockname()[1])
        return server

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        try:
            await asyncio.gather(self._pass_requests(reader, up_writer), self._hold_answers(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await w.wait_closed()
            self._tasks.discard(task)

    @staticmethod
    async def _pass_requests(reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            up_writer.write(data)
            await up_writer.drain()
        up_writer.close()

    async def _hold_answers(self, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held = bytearray()
        while True:
            try:
                data = await asyncio.wait_for(up_reader.read(65536), timeout=self.quiet_s if held else None)
            except TimeoutError:  # the server went quiet: pass on all it said, in one write
                writer.write(bytes(held))
                held.clear()
                await writer.drain()
                continue
            if not data:
                break
            held += data
        if held:
            writer.write(bytes(held))
            await writer.drain()
        writer.close()
