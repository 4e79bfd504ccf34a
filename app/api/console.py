"""The web console at /console: one page and its assets, under a strict policy.

Every reply under /console carries a Content-Security-Policy that allows scripts, styles,
images and API calls from this origin only (no inline script, no eval), requires Trusted
Types so that no string can become HTML through a DOM sink, and forbids framing; with
`Referrer-Policy: no-referrer` no URL of the console leaves it. The page talks to the public
API with the token the person signs in with: it has no endpoint of its own.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.console import ASSETS_DIR, INDEX_HTML

PATH = "/console"
POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "font-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    "Cache-Control": "no-cache",  # revalidate: a new release's files are used at once
}


class _PolicedFiles(StaticFiles):
    """Static files that carry the console's headers."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(HEADERS)
        return response


def install_console(app: FastAPI) -> None:
    """Serve the page at /console/ (/console redirects there, so relative URLs hold behind a
    path prefix) and its assets under /console/assets."""
    app.mount(f"{PATH}/assets", _PolicedFiles(directory=ASSETS_DIR), name="console-assets")

    @app.get(PATH, include_in_schema=False)
    async def console_redirect() -> RedirectResponse:
        return RedirectResponse("console/", status_code=308, headers=HEADERS)

    @app.get(f"{PATH}/", include_in_schema=False)
    async def console_page() -> FileResponse:
        return FileResponse(INDEX_HTML, media_type="text/html; charset=utf-8", headers=HEADERS)
