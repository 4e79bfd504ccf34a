"""Text strategies shared by the properties: prose with odd corners, not just random code points.

`st.text()` alone rarely makes anything long enough to split or shaped like a document, so these
mix real words, separators of every kind (CRLF, form feed, U+2028, NBSP …), control characters,
long unbroken runs and arbitrary unicode.
"""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = [
    *("river", "stone", "Garden", "lantern", "harbour", "1984", "don't", "e-mail", "a.b.c"),
    *("(PostgreSQL)", "résumé", "naïve", "東京", "Straße", "🙂", "👩\u200d👩\u200d👧", "ﬁ", "x"),
]
SEPARATORS = [
    *(" ", "  ", "\n", "\n\n", "\t", "\r\n", "\r", ". ", ", ", "; ", "! "),
    *("\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\u00a0", "\u2028", "\u2029", "\u3000", "\ufeff"),
]
# Characters the MiniLM tokenizer turns into no token at all (controls, format characters).
INVISIBLE = ["\x01", "\x1b", "\x7f", "\u200b", "\u00ad", "\u2060"]

separators = st.sampled_from(SEPARATORS)
words = st.sampled_from(WORDS)
# Runs longer than a small chunk, and punctuated runs the tokenizer splits into many tokens.
long_runs = st.builds(
    lambda unit, times: unit * times,
    st.sampled_from(["a", "ab", "a.", "1,", "東"]),
    st.integers(20, 120),
)


def prose(*, max_fragments: int = 120) -> st.SearchStrategy[str]:
    """Text made of words, separators, invisible characters, long runs and arbitrary snippets."""
    fragment = st.one_of(
        words,
        words,
        separators,
        separators,
        st.sampled_from(INVISIBLE),
        long_runs,
        st.text(min_size=1, max_size=8),
    )
    return st.lists(fragment, max_size=max_fragments).map("".join)


def odd_text(*, max_size: int = 60) -> st.SearchStrategy[str]:
    """Short text: arbitrary unicode, or prose with markdown-special characters mixed in."""
    specials = st.sampled_from(["*", "**", "_", "`", "[", "]", "(", ")", "<", ">", "#", "|", "\\"])
    mixed = st.lists(st.one_of(words, separators, specials), max_size=12).map("".join)
    return st.one_of(st.text(max_size=max_size), mixed)
