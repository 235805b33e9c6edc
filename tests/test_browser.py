"""The built site in a real browser: figures have a size, maths is typeset, nothing errors.

Opt-in: needs a Chromium (Debian's ``chromium`` package, ``/usr/bin/chromium``, or
``$CHROMIUM``) and Playwright's Python package (``pip install playwright``; its own browser
download is not used). Skipped with a reason when either is absent. Serves the site built by
``tests/test_docs.py`` on a free localhost port, blocks every request to another host, and
saves a full-page screenshot of each page under ``$EE_SCREENSHOTS`` (default: pytest's
temporary folder).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_docs import build_site  # the same strict build, once per session

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
PAGES = [
    "",
    "lookup-is-a-matmul/",
    "gradients/",
    "efficiency/",
    "when-equivalence-breaks/",
    "embedding-bag/",
    "verify/",
    "sharded/",
    "tensorflow-keras/",
    "api/embedding_equivalence/",
]
#: Pages with display maths, and the least number of typeset formulas each must show.
MATHS = {
    "lookup-is-a-matmul/": 1,
    "gradients/": 3,
    "efficiency/": 3,
    "when-equivalence-breaks/": 8,
    "sharded/": 3,
}


@pytest.fixture(scope="module")
def sync_api() -> Any:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set $CHROMIUM)")
    return pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, sync_api: Any) -> Iterator[str]:
    site = build_site(tmp_path_factory)
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def browser(sync_api: Any) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("EE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize("page", PAGES, ids=[p.strip("/") or "home" for p in PAGES])
def test_page_renders(browser: Any, base_url: str, screenshots: Path, page: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    external: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))

    def route(r: Any) -> None:
        if r.request.url.startswith(base_url):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    tab.route("**/*", route)
    try:
        response = tab.goto(base_url + page, wait_until="load")
        assert response is not None
        assert response.status == 200
        if page in MATHS:
            tab.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
            )
            tab.evaluate("() => MathJax.startup.promise")
        box = "e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; }"
        sizes = tab.eval_on_selector_all("svg.ee-figure", f"els => els.map({box})")
        for width, height in sizes:
            assert width > 50, sizes
            assert height > 30, sizes
        if page in MATHS:
            typeset = tab.eval_on_selector_all(".arithmatex mjx-container svg", "els => els.length")
            assert typeset >= MATHS[page]
            assert tab.locator("mjx-merror").count() == 0  # no TeX errors
        tab.screenshot(path=str(screenshots / f"{page.strip('/') or 'home'}.png"), full_page=True)
    finally:
        context.close()
    # The repository link makes Material ask api.github.com for stars and forks; it is
    # blocked here (no network) and is the only request allowed to leave the site.
    assert all(u.startswith("https://api.github.com/") for u in external), external
    unexpected = [e for e in errors if "net::ERR_FAILED" not in e or not external]
    assert not unexpected, unexpected
