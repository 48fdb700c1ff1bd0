"""The `search` tool: several queries at once against the local sandbox Wikipedia and, for a run of a
namespace with documents of its own (or shared ones), those documents too.

Each run binds the tool to its caller's namespace (`for_namespace`, called by `offered_tools`), so a
user's documents are searched for that user's questions alone, and the sources that user struck as
wrong (memory_db.struck, by backend.tools.struck's keys) are never returned to them. Per query, the wiki's ranking and
the documents' ranking are fused by reciprocal rank: the n-th of either list counts the same, and
between equal ranks the passage that matches the query better (BM25 over the candidates) comes first. A query no document matches gets the wiki's results unchanged,
and a namespace without documents the very same content as the wiki search alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from backend.tools.base import BaseTool, Passage, ToolCapabilities, format_results_by_query, string_list_schema
from backend.tools.corpus import Document
from backend.tools.page_links import PageLink, PageLinks, base_name, next_page
from backend.tools.struck import passage_key
from backend.tools.text_ranking import rank_texts
from backend.tools.wiki_index import RRF_CONSTANT, WikiIndex

if TYPE_CHECKING:
    from backend.documents.store import DocumentStore

WIKI_SOURCE_PREFIX = "wiki:"  # the sources of the wiki's own articles (backend.tools.corpus)
PASSAGES_PER_QUERY = 3
MAX_QUERIES = 5
MAX_STRUCK_DEPTH = 50  # how far past the top k a search reads to make up for struck passages
# What the Executor reads per paragraph: on a CPU every prompt token costs (~45 tok/s here); the
# reader is given whole paragraphs, chosen over the whole run, when it answers.
TEXT_LIMIT = 400
WIKI_DESCRIPTION = (
    "Search the local Wikipedia for each query; returns the top 3 paragraphs per query. "
    "Use short, specific queries (names, titles, key terms)."
)
DOCUMENTS_DESCRIPTION = (
    "Search the local Wikipedia and the user's own documents for each query; returns the top 3 paragraphs "
    "per query, each with its source. Use short, specific queries (names, titles, key terms)."
)


class WikiSearchTool(BaseTool):
    name = "search"
    description = WIKI_DESCRIPTION
    capabilities = ToolCapabilities(query_argument="query_list", links_pages=True)
    parameters = {
        "type": "object",
        "properties": {"query_list": string_list_schema("search queries", max_items=MAX_QUERIES)},
        "required": ["query_list"],
    }

    def __init__(self, index: WikiIndex, documents: DocumentStore | None = None, *, namespace: str | None = None,
                 struck: Callable[[str], Collection[str]] | None = None, struck_keys: Collection[str] = ()) -> None:
        """`struck(namespace)`: the keys of the passages struck in a namespace (MemoryStore.struck_keys);
        `struck_keys`: those of the namespace this search is bound to."""
        self.index = index
        self.documents = documents
        self.namespace = namespace
        self.struck = struck
        self.struck_keys = frozenset(struck_keys)
        if (documents is not None or struck is not None) and namespace is None:
            self.capabilities = ToolCapabilities(query_argument="query_list", per_namespace=True, links_pages=True)

    def for_namespace(self, namespace: str) -> WikiSearchTool:
        """This search for one caller: the wiki and the documents `namespace` may read, without the
        passages struck in `namespace`."""
        struck_keys = self.struck(namespace) if self.struck is not None else ()
        bound = WikiSearchTool(self.index, self.documents, namespace=namespace, struck_keys=struck_keys)
        if self.documents is not None and self.documents.has_documents(namespace):
            bound.description = DOCUMENTS_DESCRIPTION
            bound.capabilities = replace(bound.capabilities, reads_documents=True)
        return bound

    def hiding(self, titles: Iterable[str]) -> WikiSearchTool:
        """This search without the wiki articles `titles`: for an evaluation's question that gives
        their text another way (a scanned page of the article as its image)."""
        hiding = WikiSearchTool(WikiWithout(self.index, frozenset(titles)), self.documents, namespace=self.namespace,
                                struck=self.struck, struck_keys=self.struck_keys)
        hiding.description = self.description
        return hiding

    def linked_page(self, question: str, passages: list[dict]) -> PageLink | None:
        """The wiki article that the retrieved wiki paragraphs `passages` name, the question does not,
        and no search has returned yet, whose text matches the question best: the page a bridge
        question's second hop needs (backend.tools.page_links), with the page naming it. None when
        there is none."""
        retrieved = {passage["title"] for passage in passages}
        asked = question.casefold()
        candidates: dict[str, str] = {}
        named_in: dict[str, str] = {}
        for passage in passages:
            if not str(passage.get("source", "")).startswith(WIKI_SOURCE_PREFIX):
                continue
            for title in self.index.page_links.named_in(passage["text"]):
                document = self.index.document(title)
                if document is None or title in retrieved or base_name(title).casefold() in asked:
                    continue
                if passage_key({"title": document.title, "source": document.source}) in self.struck_keys:
                    continue
                candidates[title] = document.text
                named_in.setdefault(title, passage["title"])
        best = next_page(question, candidates)
        return PageLink(best, named_in[best]) if best else None

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        query_list = [query.strip() for query in arguments["query_list"]]
        depth = PASSAGES_PER_QUERY + min(len(self.struck_keys), MAX_STRUCK_DEPTH)
        results = [self._unstruck(passages) for passages in self.index.search(query_list, k=depth)]
        if self.documents is not None and self.namespace is not None and self.documents.has_documents(self.namespace):
            found = [self._unstruck([passage for passage, _ in documents])
                     for documents in self.documents.search(self.namespace, query_list, k=depth)]
            results = [fuse_by_rank(query, wiki, documents, k=PASSAGES_PER_QUERY) if documents else wiki
                       for query, wiki, documents in zip(query_list, results, found, strict=True)]
        results = [passages[:PASSAGES_PER_QUERY] for passages in results]
        content = format_results_by_query(query_list, results, text_limit=TEXT_LIMIT)
        return content, [passage for passages in results for passage in passages]

    def _unstruck(self, passages: list[Passage]) -> list[Passage]:
        if not self.struck_keys:
            return passages[:PASSAGES_PER_QUERY]
        return [passage for passage in passages if passage_key(passage) not in self.struck_keys][:PASSAGES_PER_QUERY]


class WikiWithout:
    """A wiki index that never returns the articles `titles` (every passage of each, whatever its
    source). A title the wiki does not hold is refused: a misspelt one would hide nothing."""

    def __init__(self, index: WikiIndex | WikiWithout, titles: frozenset[str]) -> None:
        held = {document.title for document in index.documents}
        missing = sorted(titles - held)
        if missing:
            raise ValueError(f"the wiki holds no article titled {missing[0]!r}; hide only titles of its articles.")
        self.index = index
        self.documents = index.documents
        self.titles = titles
        self.hidden_passages = sum(document.title in titles for document in index.documents)

    @property
    def page_links(self) -> PageLinks:
        return self.index.page_links

    def document(self, title: str) -> Document | None:
        return None if title in self.titles else self.index.document(title)

    def search(self, query_list: list[str], k: int = 3) -> list[list[Passage]]:
        results = self.index.search(query_list, k=k + self.hidden_passages)
        return [[passage for passage in passages if passage.title not in self.titles][:k] for passages in results]


def fuse_by_rank(query: str, wiki: list[Passage], documents: list[Passage], *, k: int) -> list[Passage]:
    """The best `k` of two ranked lists by reciprocal rank (1 / (60 + rank) each); equal ranks are
    ordered by how well each candidate matches the query on one scale for both sources: BM25 over
    the candidates themselves (cheap: a handful of texts, no model call)."""
    candidates = [(passage, rank) for rank, passage in enumerate(wiki, start=1)]
    candidates += [(passage, rank) for rank, passage in enumerate(documents, start=1)]
    match = [0.0] * len(candidates)
    for index, score in rank_texts([f"{p.title}. {p.text}" for p, _ in candidates], query):
        match[index] = score
    order = sorted(range(len(candidates)), key=lambda i: (-1.0 / (RRF_CONSTANT + candidates[i][1]), -match[i], i))
    return [candidates[i][0] for i in order[:k]]
