"""The settings table of docs/operations.md, generated from app/settings.py.

    .venv/bin/python -m tests.docs.settings_table           # print the table
    .venv/bin/python -m tests.docs.settings_table --write   # rewrite docs/operations.md

Names and defaults come from `Settings`; each meaning is kept from the table as it stands in
the doc (or taken from the field's `description`), so rewriting never loses the prose. A
setting without a meaning anywhere is listed and the script exits 1: write its meaning in the
doc's table (a row with the name and an empty default is enough for --write to fill the rest).
tests/docs/test_operations.py fails when the doc and the settings disagree.
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
from pathlib import Path

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.settings import Settings, default_cache_dir, default_data_dir

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"
HEADER = "| variable | default | meaning |\n| --- | --- | --- |\n"
ROW = re.compile(r"^\| `(RAG_[A-Z0-9_]+)` \| (.*?) \| (.*) \|$")


def env_name(field: str) -> str:
    return f"RAG_{field.upper()}"


def render_default(info: FieldInfo) -> str:
    """The default as a reader would type it in the environment."""
    if info.default_factory is default_data_dir:
        return "platform data dir (`~/.local/share/rag-service` on Linux)"
    if info.default_factory is default_cache_dir:
        return "platform cache dir (`~/.cache/rag-service` on Linux)"
    value = info.default
    if value is PydanticUndefined or value is None:
        return "—"
    if value == "":
        return "(empty)"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        return "`" + ",".join(str(v) for v in value) + "`"
    if isinstance(value, dict):
        return f"`{json.dumps(value, separators=(',', ':'))}`"
    return f"`{value}`"


def documented(text: str) -> dict[str, tuple[str, str]]:
    """name -> (default, meaning) of the rows between the markers."""
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    rows = {}
    for line in block.splitlines():
        if match := ROW.match(line.strip()):
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def expected_rows() -> dict[str, str]:
    """name -> rendered default, for every setting, in the order Settings declares them."""
    return {env_name(n): render_default(f) for n, f in Settings.model_fields.items()}


def table(text: str) -> tuple[str, list[str]]:
    """The regenerated table, and the names that have no meaning yet."""
    known = documented(text)
    lines, missing = [], []
    for name, default in expected_rows().items():
        field = Settings.model_fields[name.removeprefix("RAG_").lower()]
        meaning = known.get(name, ("", ""))[1].strip() or (field.description or "").strip()
        if not meaning:
            missing.append(name)
        lines.append(f"| `{name}` | {default} | {meaning} |")
    return HEADER + "\n".join(lines) + "\n", missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/operations.md")
    args = parser.parse_args()
    text = DOC.read_text()
    generated, missing = table(text)
    if args.write:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        DOC.write_text(f"{before}{BEGIN}\n{generated}{END}{after}")
    else:
        sys.stdout.write(generated)
    if missing:
        sys.stderr.write(f"no meaning yet for: {', '.join(missing)} (write one in {DOC.name})\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
