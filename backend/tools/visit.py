"""The `visit` tool: fetch one web page and return its paragraphs most relevant to a goal.

Guards: http/https only; every hop of a redirect is re-checked against the SSRF guard; time and
size are capped. The page text is data for the model to read, never instructions to follow.
Bound to a caller's namespace, it does not read a page struck as wrong there (backend.tools.struck),
before or after a redirect: it answers with a short note saying so instead of the page's text.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import httpx

from backend.tools.base import BaseTool, Passage, ToolCapabilities, ToolError
from backend.tools.html_text import html_title_and_paragraphs, text_paragraphs
from backend.tools.struck import StruckPages
from backend.tools.text_ranking import rank_texts
from backend.tools.url_safety import ResolvedURL, request_to_address, resolve_checked

MAX_BYTES = 2_000_000
MAX_REDIRECTS = 4
TIMEOUT_SECONDS = 10.0
CONTENT_LIMIT = 2000
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
USER_AGENT = "MIA-research-assistant/0.1 (page visit tool)"


@dataclass
class FetchedPage:
    url: str  # after redirects
    content_type: str
    body: bytes
    encoding: str
    cut: bool  # True when the body was longer than the byte cap


class VisitTool(BaseTool):
    name = "visit"
    description = (
        "Read one web page (http/https) and return its paragraphs most relevant to your goal. "
        "Use it on a link found by web_search."
    )
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "description": "full http(s) address"},
            "goal": {"type": "string", "minLength": 1, "description": "what you want to learn from the page"},
        },
        "required": ["url", "goal"],
    }

    def __init__(
        self, *, allow_private: bool = False, timeout_seconds: float = TIMEOUT_SECONDS, max_bytes: int = MAX_BYTES,
        struck: Callable[[str], Collection[str]] | None = None, struck_keys: Collection[str] = (),
    ) -> None:
        """`struck(namespace)`: the keys of the sources struck in a namespace (MemoryStore.struck_keys);
        `struck_keys`: those of the namespace this tool is bound to."""
        self.allow_private = allow_private
        self.timeout_seconds = timeout_seconds
        self.max_bytes = max_bytes
        self.struck = struck
        self.struck_pages = StruckPages(struck_keys)
        if struck is not None:
            self.capabilities = ToolCapabilities(per_namespace=True)

    def for_namespace(self, namespace: str) -> VisitTool:
        """This tool for one caller: it does not read the pages struck in `namespace`."""
        return VisitTool(allow_private=self.allow_private, timeout_seconds=self.timeout_seconds,
                         max_bytes=self.max_bytes, struck_keys=self.struck(namespace) if self.struck is not None else ())

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        url = arguments["url"].strip()
        if self.struck_pages.holds(url):
            return struck_note(url), []
        page = self.fetch(url)
        text = page.body.decode(page.encoding, errors="replace")
        if page.content_type == "text/plain":
            title, paragraphs = "", text_paragraphs(text)
        else:
            title, paragraphs = html_title_and_paragraphs(text)
        read = Passage(title=title or page.url, text="", source="page", score=1.0, url=page.url)
        if self.struck_pages.holds(page.url, read):
            return struck_note(page.url), []
        if not paragraphs:
            raise ToolError(f"the page {page.url} has no readable text; try another result.")
        chosen = select_paragraphs(paragraphs, arguments["goal"], limit=CONTENT_LIMIT)
        header = f"Page: {title or page.url} <{page.url}>"
        if page.cut:
            header += f" (page cut at {self.max_bytes // 1000} kB)"
        content = header + "\n" + "\n".join(chosen)
        read.text = "\n".join(chosen)
        return content, [read]

    def fetch(self, url: str) -> FetchedPage:
        deadline = time.monotonic() + self.timeout_seconds
        with httpx.Client(timeout=self.timeout_seconds, follow_redirects=False, trust_env=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                target = resolve_checked(url, allow_private=self.allow_private)
                response = self._connect(client, target)
                try:
                    if response.is_redirect:
                        url = str(target.url.join(response.headers["location"]))
                        continue
                    return self._read_page(str(target.url), response, deadline)
                finally:
                    response.close()
        raise ToolError(f"{url} redirects more than {MAX_REDIRECTS} times; give the final address instead.")

    def _connect(self, client: httpx.Client, target: ResolvedURL) -> httpx.Response:
        """Send the GET to each checked address in turn until one accepts the connection."""
        url = str(target.url)
        for address in target.addresses:
            request = request_to_address(client, "GET", target, address, headers={"User-Agent": USER_AGENT})
            try:
                return client.send(request, stream=True)
            except httpx.ConnectError as problem:
                failure: httpx.HTTPError = problem
            except httpx.TimeoutException as problem:
                raise ToolError(f"{url} did not answer within {self.timeout_seconds:g} s; try another page.") from problem
            except httpx.HTTPError as problem:
                raise ToolError(f"{url} cannot be reached ({type(problem).__name__}); try another page.") from problem
            except httpx.InvalidURL as problem:  # httpx builds the next request of a redirect even unfollowed
                raise ToolError(
                    f"{url} redirects to an address that is not an http:// or https:// page; try another page."
                ) from problem
        raise ToolError(f"{url} cannot be reached ({type(failure).__name__}); try another page.") from failure

    def _read_page(self, url: str, response: httpx.Response, deadline: float) -> FetchedPage:
        if response.status_code >= 400:
            raise ToolError(f"{url} answered HTTP {response.status_code}; try another page.")
        content_type = response.headers.get("content-type", "text/html").split(";")[0].strip().lower()
        if content_type not in TEXT_TYPES:
            raise ToolError(f"{url} is {content_type!r}, not a text or HTML page; only web pages can be read.")
        body = bytearray()
        cut = False
        try:
            for chunk in response.iter_bytes():  # decoded, so a compressed bomb is capped too
                body += chunk
                if len(body) > self.max_bytes:
                    del body[self.max_bytes :]
                    cut = True
                    break
                if time.monotonic() > deadline:
                    raise ToolError(f"{url} took longer than {self.timeout_seconds:g} s to send; try another page.")
        except httpx.TimeoutException as problem:
            raise ToolError(f"{url} stopped sending within {self.timeout_seconds:g} s; try another page.") from problem
        except httpx.HTTPError as problem:
            raise ToolError(f"reading {url} failed ({type(problem).__name__}); try another page.") from problem
        return FetchedPage(
            url=url, content_type=content_type, body=bytes(body), encoding=_known_encoding(response.charset_encoding), cut=cut
        )


def struck_note(url: str) -> str:
    """What `visit` answers for a page the analyst struck as wrong: not its text."""
    return (f"Not read: the analyst struck the page <{url}> as a wrong source for their questions. "
            "Look for the fact on another page.")


def _known_encoding(name: str | None) -> str:
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"



def select_paragraphs(paragraphs: list[str], goal: str, *, limit: int) -> list[str]:
    """Paragraphs sharing words with `goal` (best first), then the rest in page order, within `limit` chars."""
    relevant = [index for index, _ in rank_texts(paragraphs, goal)]
    ranked = relevant + sorted(set(range(len(paragraphs))) - set(relevant))
    chosen: list[str] = []
    used = 0
    for index in ranked:
        paragraph = paragraphs[index]
        room = limit - used
        if room < 80:
            break
        if len(paragraph) > room:
            paragraph = paragraph[: room - 1] + "…"
        chosen.append(paragraph)
        used += len(paragraph) + 1
    return chosen
