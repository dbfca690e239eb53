"""The ranking behind server-executed tool search: BM25 over deferred tools' names and descriptions.

Each searchable tool is one document: its name split into words (`get_delivery_eta` reads as
"get delivery eta"), its description, its namespace's name and description, and the names and
descriptions of its parameters. `bm25s` scores a query against them (English stop words removed,
a plural `s` folded, so "orders" finds "order"); documents scoring zero are never returned, so a
query that shares no word with any tool loads nothing.

Rejected: substring or regular-expression matching (it cannot rank, and a query naturally written
as a sentence would match nothing or everything); embeddings (a model download, and results that
would drift between versions). `bm25s` is imported on first use: it brings numpy and scipy, which
a server that never searches need not load.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Document", "rank", "words"]

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@dataclass(frozen=True, slots=True)
class Document:
    key: str
    """What a hit names: a tool's qualified name (`shipping.get_delivery_eta`)."""
    text: str


def words(text: str) -> str:
    """Identifiers as words: `get_deliveryETA` -> `get delivery ETA`."""
    return " ".join(_WORD.findall(text))


def _fold(tokens: list[str]) -> list[str]:
    return [t[:-1] if len(t) > 3 and t.endswith("s") and not t.endswith("ss") else t for t in tokens]


def rank(query: str, documents: Sequence[Document], limit: int) -> list[str]:
    """The keys of the documents that match `query`, best first, at most `limit`; ties keep the
    documents' order."""
    if not documents or limit <= 0 or not query.strip():
        return []
    import bm25s  # noqa: PLC0415 - heavy, and only a search needs it

    corpus = [words(d.text).lower() for d in documents]
    tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=_fold, show_progress=False)
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    # Stop words and words no tool uses are not in the vocabulary: they score nothing.
    vocab = set(tokens.vocab)
    terms = [t for t in _fold(words(query).lower().split()) if t in vocab]
    if not terms:
        return []
    scores = index.get_scores(terms)
    order = sorted(range(len(documents)), key=lambda i: (-float(scores[i]), i))
    return [documents[i].key for i in order if float(scores[i]) > 0][:limit]
