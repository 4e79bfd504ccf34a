"""docs/operations.md lists every setting with its default, and the compose stack it describes."""

from __future__ import annotations

from tests.docs.settings_table import DOC, documented, expected_rows, table

HOW = (
    "add a row to the table between the settings markers in docs/operations.md for each "
    "(`| `NAME` | | meaning |`), then run `.venv/bin/python -m tests.docs.settings_table "
    "--write` to fill in the defaults"
)


def test_every_setting_is_in_the_operations_doc() -> None:
    missing = sorted(set(expected_rows()) - set(documented(DOC.read_text())))
    assert not missing, f"docs/operations.md lacks the settings {', '.join(missing)}: {HOW}"


def test_the_doc_names_no_setting_that_does_not_exist() -> None:
    stale = sorted(set(documented(DOC.read_text())) - set(expected_rows()))
    assert not stale, f"docs/operations.md documents {', '.join(stale)}, which are no settings"


def test_defaults_and_meanings_match_the_settings() -> None:
    text = DOC.read_text()
    generated, without_meaning = table(text)
    assert without_meaning == [], f"write a meaning for {', '.join(without_meaning)}"
    current = text.split("<!-- settings:begin -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert current == generated, (
        "the settings table is out of date: run `.venv/bin/python -m tests.docs.settings_table "
        "--write`"
    )


def test_a_new_setting_would_be_reported_by_name() -> None:
    text = DOC.read_text()
    without = "\n".join(line for line in text.splitlines() if "`RAG_QUERY_MAX_CHARS`" not in line)
    assert "RAG_QUERY_MAX_CHARS" in set(expected_rows()) - set(documented(without))
