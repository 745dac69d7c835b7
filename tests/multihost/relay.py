"""A TCP relay: ``python relay.py LISTEN_HOST:PORT[,LISTEN_HOST:PORT...] TARGET_HOST:PORT``.

The multi-host test's hosts are network namespaces; the machine's PostgreSQL listens on the root
namespace's 127.0.0.1 only, which no other namespace can reach. This relay listens on the root side of
each host's veth pair and forwards to PostgreSQL. It prints ``ready`` once listening.
"""

from __future__ import annotations

import asyncio
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(listen: list[tuple[str, int]], target: tuple[str, int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    servers = [await asyncio.start_server(handle, host, port) for host, port in listen]
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


if __name__ == "__main__":
    asyncio.run(main([_addr(a) for a in sys.argv[1].split(",")], _addr(sys.argv[2])))
