"""One delivery attempt: resolve and check the target's addresses, then POST to an address
checked (the next one when it refuses the connection), the URL's host still naming the server
(the Host header, TLS server name and certificate), with no redirects, proxies or retries of
its own, within one time limit."""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import anyio
import certifi
import httpcore

from app.webhooks.targets import Target, TargetRefused, resolve

ERROR_BODY_CHARS = 200  # of a refusing receiver's reply, kept in the error


@dataclass(frozen=True, slots=True)
class Attempt:
    """How an attempt went: `error` is None when the receiver accepted (2xx)."""

    status: int | None
    error: str | None


async def deliver(
    target: Target, *, body: bytes, headers: Mapping[str, str], timeout_seconds: float
) -> Attempt:
    try:
        with anyio.fail_after(timeout_seconds):
            *others, last = await resolve(target)
            for address in others:  # the next address when one refuses the connection
                try:
                    return await _post(target, address, body=body, headers=headers)
                except httpcore.ConnectError:
                    continue
            return await _post(target, last, body=body, headers=headers)
    except TargetRefused as error:
        return Attempt(None, f"refused: {error}")
    except TimeoutError:
        return Attempt(None, f"no reply within {timeout_seconds:g} s")
    except (httpcore.NetworkError, httpcore.TimeoutException, httpcore.ProtocolError) as error:
        return Attempt(None, f"{type(error).__name__}: {error}" if str(error) else repr(error))
    except (OSError, ssl.SSLError) as error:
        return Attempt(None, f"{type(error).__name__}: {error}")


async def _post(
    target: Target, address: str, *, body: bytes, headers: Mapping[str, str]
) -> Attempt:
    context = ssl.create_default_context(cafile=certifi.where())
    sent = [
        (b"content-type", b"application/json"),
        *((name.encode(), value.encode()) for name, value in headers.items()),
    ]
    async with (
        httpcore.AsyncConnectionPool(
            ssl_context=context, max_connections=1, network_backend=_Pinned(address)
        ) as pool,
        pool.stream("POST", target.url, headers=sent, content=body) as response,
    ):
        if 200 <= response.status < 300:
            return Attempt(response.status, None)
        text = await _start(response.aiter_stream())
        redirect = " (redirects are not followed)" if 300 <= response.status < 400 else ""
        return Attempt(response.status, f"HTTP {response.status}{redirect}: {text}".rstrip(": "))


async def _start(chunks: object) -> str:
    """The first characters of a reply's body, read no further."""
    data = b""
    async for chunk in chunks:  # type: ignore[attr-defined]
        data += chunk
        if len(data) >= ERROR_BODY_CHARS:
            break
    return data[:ERROR_BODY_CHARS].decode(errors="replace").strip()


class _Pinned(httpcore.AsyncNetworkBackend):
    """Connects wherever asked to the one address already checked."""

    def __init__(self, address: str) -> None:
        self._address, self._inner = address, httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            self._address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise OSError("webhooks connect over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
