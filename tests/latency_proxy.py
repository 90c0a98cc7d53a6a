"""A TCP proxy on 127.0.0.1 that delays what clients send (issue 34, point 1): each chunk a client
sends reaches the server after a random 0..``max_delay_s`` seconds (in order on its connection),
as a busy server or a cluster network does. Answers come back at once. Runs its own asyncio loop
in a daemon thread; ``with LatencyProxy(port) as proxy: proxy.url``."""

from __future__ import annotations

import asyncio
import random
import threading


class LatencyProxy:
    def __init__(self, upstream_port: int, max_delay_s: float, seed: int = 0):
        self.upstream_port = upstream_port
        self.max_delay_s = max_delay_s
        self.random = random.Random(seed)
        self.loop = asyncio.new_event_loop()
        self.port = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _pipe(self, reader, writer, delayed: bool) -> None:
        try:
            while chunk := await reader.read(65536):
                if delayed:
                    await asyncio.sleep(self.random.uniform(0, self.max_delay_s))
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, client_reader, client_writer) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(self._pipe(client_reader, server_writer, True),
                             self._pipe(server_reader, client_writer, False))

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> "LatencyProxy":
        self._thread.start()
        self._ready.wait(10)
        return self

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._cancel_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
