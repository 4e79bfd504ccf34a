"""The console's files over HTTP: served under the strict policy, from this origin only,
with no inline script or style and no HTML parsing of data in any module."""

from __future__ import annotations

import re
from pathlib import Path

from httpx import AsyncClient

from app.api.console import HEADERS
from app.console import STATIC_DIR

FILES = sorted(p for p in STATIC_DIR.rglob("*") if p.is_file())
MODULES = [p for p in FILES if p.suffix == ".js"]
TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


def _policy(header: str) -> dict[str, str]:
    return {d.split()[0]: d.partition(" ")[2] for d in (s.strip() for s in header.split(";")) if d}


async def test_the_page_and_every_asset_carry_the_policy(client: AsyncClient) -> None:
    moved = await client.get("/console")
    assert moved.status_code == 308
    assert moved.headers["location"] == "console/"
    page = await client.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    replies = [moved, page]
    for path in FILES:
        if path.name == "index.html":
            continue
        reply = await client.get(f"/console/{path.relative_to(STATIC_DIR).as_posix()}")
        assert reply.status_code == 200, path
        assert reply.headers["content-type"].startswith(TYPES[path.suffix]), path
        replies.append(reply)
    for reply in replies:
        for name, value in HEADERS.items():
            assert reply.headers[name] == value, (reply.url, name)
    policy = _policy(page.headers["content-security-policy"])
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"  # no inline script, no eval
    assert policy["frame-ancestors"] == "'none'"
    assert policy["require-trusted-types-for"] == "'script'"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    missing = await client.get("/console/assets/js/nothing.js")
    assert missing.status_code == 404


def test_the_files_load_nothing_from_elsewhere_and_hold_no_inline_code() -> None:
    svg_namespace = "http://www.w3.org/2000/svg"
    for path in FILES:
        text = path.read_text().replace(svg_namespace, "")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), path
    html = (STATIC_DIR / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="assets/js/main.js">']
    assert not re.search(r"\son[a-z]+=|\sstyle=|<style", html)


def test_no_module_parses_html_or_evaluates_strings() -> None:
    forbidden = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"createContextualFragment|DOMParser|srcdoc|console\.(log|info|debug)"
    )
    for path in MODULES:
        code = re.sub(r"^\s*(//|\*|/\*).*$", "", path.read_text(), flags=re.M)  # comments
        found = [m.group(0) for m in forbidden.finditer(code)]
        assert found == [], (path.name, found)


def test_every_module_is_reachable_from_the_page() -> None:
    """Each module is imported by another (or is main.js): no dead file ships."""
    imported = {"main.js"}
    for path in MODULES:
        for target in re.findall(r"from '([^']+\.js)'", path.read_text()):
            imported.add(Path(target).name)
    assert {p.name for p in MODULES} == imported
