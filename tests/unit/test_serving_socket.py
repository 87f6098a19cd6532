"""The listening socket approvals serve makes."""

from __future__ import annotations

import asyncio
import socket

from web.serving import bind


async def test_accepted_connections_send_without_waiting_for_acks() -> None:
    """asyncio turns Nagle's algorithm off only on sockets whose proto is TCP; a socket made
    with proto 0 kept it on, and each response waited about 40 ms for a delayed ACK."""
    sock = bind("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = writer.get_extra_info("socket")
        accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(on_connect, sock=sock)
    try:
        host, port = sock.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        try:
            assert await asyncio.wait_for(accepted, 5) != 0
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()
