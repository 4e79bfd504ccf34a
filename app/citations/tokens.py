"""Token counting for context budgets.

`TokenCounter` is all the context builder needs. Two implementations:

- `TokenizerCounter`, over a Hugging Face `tokenizers.Tokenizer` (by default the MiniLM
  `tokenizer.json` of the local embedding model, see `load_token_counter`). It counts without
  special tokens, truncation or padding (the model file enables truncation at 128 and padding
  to 128, which would make every count wrong). For BERT-style tokenizers (BertPreTokenizer,
  which splits on whitespace first) a text's count is the sum of its whitespace-separated words'
  counts, so word counts are cached: exact, and about ten times faster on natural text.
- `ApproxTokenCounter`, `ceil(len(text) / chars_per_token)`: no tokenizer at all, used only
  when explicitly chosen (tests, or a deployment without the model files).

Any other counter (e.g. a tiktoken encoding wrapped in a class with `count`) fits the protocol.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer, normalizers, pre_tokenizers

from app.embeddings.local import default_tokenizer_path

DEFAULT_WORD_CACHE_SIZE = 200_000

# Python's str.split() splits on these control characters, the BERT normalizer deletes them
# (joining the words around them): a text holding one is counted by the tokenizer as a whole.
_SPLIT_MISMATCH = re.compile("[\x0b\x0c\x1c-\x1f\x85]")


class TokenCounter(Protocol):
    """Counts the tokens of a text, as the LLM that will read the context would (or close)."""

    def count(self, text: str) -> int: ...


class TokenizerCounter:
    """Exact counts from a `tokenizers.Tokenizer`, without special tokens."""

    def __init__(self, tokenizer: Tokenizer, *, word_cache_size: int = DEFAULT_WORD_CACHE_SIZE):
        # A private copy: turning truncation and padding off must not change the caller's.
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._cache_size = word_cache_size if _splits_on_whitespace(self._tokenizer) else 0
        self._words: dict[str, int] = {}

    @property
    def cached_words(self) -> int:
        return len(self._words)

    def clear_cache(self) -> None:
        self._words.clear()

    def count(self, text: str) -> int:
        if self._cache_size <= 0 or _SPLIT_MISMATCH.search(text):
            return len(self._tokenizer.encode(text, add_special_tokens=False))
        words = text.split()
        table = self._words
        missing = {word for word in words if word not in table}
        if missing:
            if len(table) + len(missing) > self._cache_size:
                table.clear()  # crude but cheap bound; the common words come back at once
                missing = set(words)
            if len(missing) > self._cache_size:
                table = {}  # too many new words to keep: count them without caching
            table.update(self._count_words(list(missing)))
        try:
            return sum(map(table.__getitem__, words))
        except KeyError:  # another thread emptied the cache meanwhile
            return len(self._tokenizer.encode(text, add_special_tokens=False))

    def _count_words(self, words: list[str]) -> dict[str, int]:
        """Each word's count, from one encode of the words as a pre-split sequence."""
        encoding = self._tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False)
        per_word = Counter(encoding.word_ids)
        return {word: per_word[index] for index, word in enumerate(words)}


class ApproxTokenCounter:
    """A tokenizer-free estimate: one token per `chars_per_token` characters, rounded up."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


def load_token_counter(
    path: Path | None = None, *, word_cache_size: int = DEFAULT_WORD_CACHE_SIZE
) -> TokenizerCounter:
    """A `TokenizerCounter` from a `tokenizer.json` file (default: the MiniLM one); load it once."""
    tokenizer = Tokenizer.from_file(str(path or default_tokenizer_path()))
    return TokenizerCounter(tokenizer, word_cache_size=word_cache_size)


def _splits_on_whitespace(tokenizer: Tokenizer) -> bool:
    """True when counting word by word gives the tokenizer's own count (BERT-style pipelines)."""
    bert_normalizer = tokenizer.normalizer is None or isinstance(
        tokenizer.normalizer, normalizers.BertNormalizer
    )
    return bert_normalizer and isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
