"""The web console's files: an HTML page, its style sheet and JavaScript modules, served as
they are (no build step, nothing loaded from elsewhere). `app/api/console.py` serves them."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
ASSETS_DIR = STATIC_DIR / "assets"
INDEX_HTML = STATIC_DIR / "index.html"
