"""The ASGI plumbing of the emulator's faults: a request body read and handed over again (a late
request carried out), an answer lost or spoiled on its way out, a connection dropped without an answer.
"""

from __future__ import annotations

from starlette.types import Message, Receive, Send

from reconciler.emulator.faults import Decision, corrupt_answer


async def swallowed(message: Message) -> None:
    """Where the answer of a request whose answer is lost goes."""


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes) -> Receive:
    """A ``receive`` that hands over ``body`` once (a late request carried out)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def corrupting(send: Send, decision: Decision) -> Send:
    """``send`` with the answer's body spoiled by :func:`corrupt_answer` (a fault: odd but 200 answers)."""
    start: list[Message] = []
    chunks: list[bytes] = []

    async def spoiling_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.append(message)
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = corrupt_answer(b"".join(chunks), decision)
        head = dict(start[0])
        head["headers"] = [
            (k, str(len(body)).encode() if k.lower() == b"content-length" else v) for k, v in head["headers"]
        ]
        await send(head)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return spoiling_send


async def drop(send: Send) -> None:
    """Close the connection without any response, as a crashed proxy would.

    uvicorn's ``send`` is a bound method of its request cycle, which holds the socket transport; closing
    that is the only way to hang up from inside an ASGI app. Other servers get a bare 502 instead.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is not None and hasattr(transport, "close"):
        transport.close()
        cycle.disconnected = True  # type: ignore[union-attr]
        return
    await send({"type": "http.response.start", "status": 502, "headers": []})
    await send({"type": "http.response.body", "body": b""})
