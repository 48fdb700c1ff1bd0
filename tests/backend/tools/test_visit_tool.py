import time

import pytest

from backend.tools.visit import CONTENT_LIMIT, VisitTool

ARTICLE = """<!doctype html><html><head><title>Great Exuma travel guide</title>
<style>body { color: red }</style><script>var secret = "tracking-code";</script></head>
<body><nav>Home | Flights | Hotels</nav>
<h1>Great Exuma</h1>
<p>Great Exuma is the largest island of the Exuma district in the Bahamas.</p>
<p>The Fyre Festival was scheduled to take place on Great Exuma in April 2017, but it collapsed.</p>
<div>Ferries leave George Town every morning.<p>Snorkelling is popular near the cays.</p></div>
<footer>Copyright travel site</footer></body></html>"""


@pytest.fixture
def visit_local():
    return VisitTool(allow_private=True, timeout_seconds=3)


def test_local_pages_are_refused_by_default(local_site):
    url = local_site.html("/article", ARTICLE)
    result = VisitTool()({"url": url, "goal": "where was the Fyre Festival"})
    assert not result.ok
    assert "refusing to visit '127.0.0.1'" in result.error and "only public web pages" in result.error


def test_main_text_is_extracted_and_ranked_by_goal(local_site, visit_local):
    url = local_site.html("/article", ARTICLE)
    result = visit_local({"url": url, "goal": "where was the Fyre Festival held"})
    assert result.ok, result.error
    lines = result.content.splitlines()
    assert lines[0] == f"Page: Great Exuma travel guide <{url}>"
    assert lines[1].startswith("The Fyre Festival was scheduled")
    for hidden in ["tracking-code", "color: red", "Flights", "Copyright"]:
        assert hidden not in result.content
    assert "Ferries leave George Town every morning." in result.content
    assert "Snorkelling is popular near the cays." in result.content
    assert result.passages[0].source == "page" and result.passages[0].url == url


def test_a_goal_sharing_no_word_keeps_page_order(local_site, visit_local):
    url = local_site.html("/article", ARTICLE)
    result = visit_local({"url": url, "goal": "zebra"})
    assert result.content.splitlines()[1] == "Great Exuma"


def test_content_is_capped(local_site, visit_local):
    paragraphs = "".join(f"<p>Paragraph {n} about islands. {'filler ' * 60}</p>" for n in range(40))
    url = local_site.html("/long", f"<html><body>{paragraphs}</body></html>")
    result = visit_local({"url": url, "goal": "islands"})
    assert result.ok
    body = result.content.split("\n", 1)[1]
    assert CONTENT_LIMIT - 200 < len(body) <= CONTENT_LIMIT + 40


def test_an_oversize_page_is_cut_at_the_byte_cap(local_site, visit_local):
    filler = "<p>" + "ocean " * 1000 + "</p>"
    page = "<html><body><p>The opening paragraph.</p>" + filler * 600 + "<p>unreachable-marker</p></body></html>"
    assert len(page) > 3_000_000
    url = local_site.html("/huge", page)
    started = time.perf_counter()
    fetched = visit_local.fetch(url)
    assert fetched.cut and len(fetched.body) == visit_local.max_bytes == 2_000_000
    result = visit_local({"url": url, "goal": "unreachable-marker"})
    assert result.ok and "(page cut at 2000 kB)" in result.content.splitlines()[0]
    assert "unreachable-marker" not in result.content
    assert time.perf_counter() - started < 10


def test_a_slow_page_times_out(local_site):
    url = local_site.html("/slow", ARTICLE, delay=3)
    started = time.perf_counter()
    result = VisitTool(allow_private=True, timeout_seconds=0.5)({"url": url, "goal": "Exuma"})
    assert not result.ok and "did not answer within 0.5 s" in result.error
    assert time.perf_counter() - started < 2.5


def test_redirects_are_followed_and_every_hop_is_checked(local_site, visit_local):
    target = local_site.html("/article", ARTICLE)
    local_site.raw("/moved", b"", {"Location": "/article"}, status=302)
    result = visit_local({"url": local_site.base_url + "/moved", "goal": "Fyre Festival"})
    assert result.ok and result.passages[0].url == target

    local_site.raw("/to-file", b"", {"Location": "file:///etc/passwd"}, status=301)
    escaped = visit_local({"url": local_site.base_url + "/to-file", "goal": "passwords"})
    assert not escaped.ok and "only http:// and https://" in escaped.error

    local_site.raw("/to-data", b"", {"Location": "data:text/html,<p>injected</p>"}, status=302)
    to_data = visit_local({"url": local_site.base_url + "/to-data", "goal": "x"})
    assert not to_data.ok and "redirects to an address that is not an http:// or https:// page" in to_data.error

    local_site.raw("/loop", b"", {"Location": "/loop"}, status=302)
    looping = visit_local({"url": local_site.base_url + "/loop", "goal": "x"})
    assert not looping.ok and "redirects more than" in looping.error


def test_non_text_pages_and_errors_are_explained(local_site, visit_local):
    image = local_site.raw("/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(100), {"Content-Type": "image/png"})
    assert "'image/png', not a text or HTML page" in visit_local({"url": image, "goal": "logo"}).error
    missing = visit_local({"url": local_site.base_url + "/absent", "goal": "x"})
    assert not missing.ok and "answered HTTP 404" in missing.error


def test_plain_text_and_declared_charsets_are_read(local_site, visit_local):
    text = "Première ligne.\n\nLa deuxième parle de Exuma.".encode("latin-1")
    url = local_site.raw("/notes.txt", text, {"Content-Type": "text/plain; charset=iso-8859-1"})
    result = visit_local({"url": url, "goal": "Exuma"})
    assert result.ok and result.content.splitlines()[1] == "La deuxième parle de Exuma."


def test_arguments_are_validated(visit_local):
    assert "missing argument 'goal'" in visit_local({"url": "http://example.org"}).error
    assert "only http:// and https://" in visit_local({"url": "file:///etc/passwd", "goal": "x"}).error


def test_the_host_name_is_sent_but_credentials_in_the_url_are_not(local_site, visit_local):
    local_site.html("/article", ARTICLE)
    port = local_site.server.server_port
    result = visit_local({"url": f"http://reader:secret@localhost:{port}/article", "goal": "Exuma"})
    assert result.ok, result.error
    headers = local_site.request_headers[-1]
    assert headers["host"] == f"localhost:{port}"
    assert "authorization" not in headers


def test_a_closed_port_is_reported(visit_local):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = visit_local({"url": f"http://127.0.0.1:{port}/", "goal": "x"})
    assert not result.ok and "cannot be reached (ConnectError)" in result.error
