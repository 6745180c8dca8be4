#!/usr/bin/python3
"""A TCP proxy on loopback that holds every chunk DELAY seconds each way: an
emulated round trip of 2 * DELAY for the protocols above TCP (HTTP/2's flow
control among them; TCP's own window is not emulated). A hand measurement's
tool (docs/BENCHMARK.md, "HTTP/2 uploads"), not a test:

    /usr/bin/python3 smoke/delay_proxy.py LISTEN_PORT TARGET_PORT 0.025
"""

import asyncio
import sys


async def pipe(reader, writer, delay):
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def read():
        while True:
            data = await reader.read(65536)
            await queue.put((loop.time() + delay, data))
            if not data:
                return

    async def write():
        while True:
            due, data = await queue.get()
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    await asyncio.gather(read(), write())


async def main(listen, target, delay):
    async def handle(client_r, client_w):
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, delay),
                             return_exceptions=True)
        client_w.close()
        server_w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
