"""The built site in a real browser, at a desktop and a phone width.

Every page of the nav is read at a desktop width (1280 x 800) and a phone width (390 x 844),
with its collapsible blocks opened, as a reader who opens them sees it: it loads without
errors, its maths is typeset, every display formula keeps its natural width and fits the
screen (nothing of it is clipped or scrolled out of sight), every figure fits the text column,
and no page is wider than the screen. The text of every figure is at least 11 CSS pixels on
the desktop and 10 on the narrowest phone supported, 375 px wide (the size read at the phone
width, scaled as the narrower column scales the figure), as the reader sees it (a figure with
a phone layout shows that one on the phone, and the test reads only what is shown). The
switch from a figure's desktop layout to its phone layout happens where the stylesheet says,
and the home page shows a figure on its first screen.

Opt-in: needs a Chromium (Debian's ``chromium`` package, ``/usr/bin/chromium``, or
``$CHROMIUM``) and Playwright's Python package (``pip install playwright``; its own browser
download is not used). Skipped with a reason when either is absent. Serves the site built by
``tests/test_docs.py`` on a free localhost port and blocks every request to another host. With
``$EE_SCREENSHOTS`` set to a folder, it also saves a full-page screenshot of each page at each
width there, for a person to look at (a full-page capture costs about a second a page, and no
test reads it).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from test_docs import _config, _nav_pages, build_site  # the same strict build, once per session

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # it builds the site first

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
#: Every page of the nav, as its URL below the site's root.
PAGES = [
    "" if page == "index.md" else page.removesuffix(".md") + "/"
    for page in _nav_pages(_config()["nav"])
]
#: Pages with display maths, and the least number of typeset formulas each must show.
MATHS = {
    "lookup-is-a-matmul/": 1,
    "gradients/": 3,
    "efficiency/": 3,
    "when-equivalence-breaks/": 8,
    "sharded/": 3,
}
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
#: The least size of a figure's text, in CSS pixels: on the desktop, and on the narrowest
#: phone supported, NARROWEST_PHONE_PX wide (the phone viewport is wider).
MIN_TEXT_PX = {"desktop": 11.0, "phone": 10.0}
#: The narrowest phone supported (iPhone SE and mini), in CSS pixels.
NARROWEST_PHONE_PX = 375
#: Below 960 px Material's column is the window less 16 px each side.
_MARGINS_PX = 32
#: Pages whose figures come from modules outside this test's scope and do not meet
#: MIN_TEXT_PX yet, and why.
SMALL_TEXT: dict[str, str] = {}
#: The widest window that shows a figure's phone layout (docs/stylesheets/extra.css), and the
#: least size of a figure's text on either side of it.
PHONE_LAYOUT_UP_TO_PX = 655

# A rendered width may differ from the one computed by a fraction of a pixel.
_SUBPIXEL = 0.5
_MAX_SHOT = 16_000  # the tallest screenshot taken, in CSS pixels


def _page_id(page: str) -> str:
    return page.strip("/") or "home"


def _on_the_narrowest_phone(px: float, figure_width: float) -> float:
    """The size a text ``px`` CSS pixels high at the phone viewport has on the narrowest phone.

    Below the switch to the phone layouts, a figure keeps its natural width up to the column's,
    the window less its margins, and a wider one is scaled down to the column, its text with
    it: ``figure_width`` is min(natural, 358) at 390 px and min(natural, 343) at 375 px. So the
    text scales by min(1, 343 / figure_width): 10 px in a figure that fills the column at
    390 px is 10 * 343 / 358 = 9.58 px at 375 px (not 10 * 375 / 390: the margins do not
    scale), and a figure narrower than 343 px keeps its size.
    """
    return px * min(1.0, (NARROWEST_PHONE_PX - _MARGINS_PX) / figure_width)


#: Opens every collapsible block of the page (``??? note``), as a reader who reads it does.
_OPEN_DETAILS = 'document.querySelectorAll("article details").forEach((d) => { d.open = true; });'

# Measures everything the tests check, once per page and width, every collapsible block
# opened first: MathJax typesets the formulas of a closed block when the page loads, hidden,
# and they are measured as shown once it is opened (MathJax sizes a formula in ex of its
# container, the same shown or hidden: the widths match those typeset in an open block). A
# figure's text size is its font size (in the SVG's units) times the scale the SVG is drawn
# at, from getScreenCTM; only the text that is shown counts (a hidden layout's text has no
# box). A display formula's natural width is that of a box as wide as MathJax's svg asks for
# (a width in ex), put in the formula's container so that an ex is the formula's ex. A
# formula is clipped when its box reaches past the visible part of its container
# (div.arithmatex, which clips and scrolls), or when the container has anything to scroll to.
_MEASURE = (
    "() => {\n  "
    + _OPEN_DETAILS
    + """
  const box = e => {
    const r = e.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top + scrollY, width: r.width, height: r.height};
  };
  const column = document.querySelector(".md-content__inner");
  const figures = [...document.querySelectorAll("svg.ee-figure")].map(svg => {
    const texts = [];
    for (const t of svg.querySelectorAll("text, tspan")) {
      const own = [...t.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own || !t.getClientRects().length) continue;
      const m = t.closest("text").getScreenCTM();
      texts.push([parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b),
                  t.textContent.trim()]);
    }
    texts.sort((a, b) => a[0] - b[0]);
    const phone = svg.querySelector(":scope > .ee-phone");
    const layout =
      !phone ? "one" : getComputedStyle(phone).display === "none" ? "desktop" : "phone";
    return {label: svg.getAttribute("aria-label"), ...box(svg), layout,
            shown: texts.length, texts: texts.slice(0, 5)};
  });
  const maths = [...document.querySelectorAll('mjx-container[display="true"]')].map(c => {
    const svg = c.querySelector(":scope > svg");
    const probe = document.createElement("div");
    probe.style.cssText = "position: absolute; visibility: hidden";
    probe.style.width = svg.getAttribute("width");
    c.appendChild(probe);
    const natural = probe.getBoundingClientRect().width;
    probe.remove();
    const scroller = c.closest("div.arithmatex");
    const r = svg.getBoundingClientRect(), s = scroller.getBoundingClientRect();
    const visible = s.left + scroller.clientLeft + scroller.clientWidth;
    return {tex: (c.querySelector("mjx-assistive-mml") || c).textContent.slice(0, 60),
            width: r.width, natural, room: scroller.clientWidth,
            clipped: r.left < s.left + scroller.clientLeft - 0.5 || r.right > visible + 0.5,
            scrolls: scroller.scrollWidth > scroller.clientWidth};
  });
  return {
    column: box(column), viewport: {width: innerWidth, height: innerHeight},
    pageWidth: document.documentElement.scrollWidth, figures, maths,
    typeset: document.querySelectorAll(".arithmatex mjx-container svg").length,
    texErrors: document.querySelectorAll("mjx-merror").length,
  };
}"""
)


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
def screenshots() -> Path | None:
    """``$EE_SCREENSHOTS``, where the pages' screenshots go, or ``None``: none taken."""
    folder = os.environ.get("EE_SCREENSHOTS")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _visit(browser: Any, base_url: str, screenshots: Path | None, page: str, viewport: str) -> Any:
    """Load ``page`` at ``viewport``, wait for its maths, and measure it."""
    context = browser.new_context(viewport=VIEWPORTS[viewport])
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
        status = None if response is None else response.status
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        tab.evaluate("() => MathJax.startup.promise")
        measured = tab.evaluate(_MEASURE)
        if screenshots is not None:
            shot = screenshots / f"{_page_id(page)}-{viewport}.png"
            # Chromium cannot capture more than 16,384 px in one go (a long page on a phone).
            height = min(tab.evaluate("document.documentElement.scrollHeight"), _MAX_SHOT)
            clip = {"x": 0, "y": 0, "width": VIEWPORTS[viewport]["width"], "height": height}
            tab.screenshot(path=str(shot), full_page=True, clip=clip)
    finally:
        context.close()
    return {"status": status, "errors": errors, "external": external, **measured}


@pytest.fixture(scope="module")
def visit(browser: Any, base_url: str, screenshots: Path | None) -> Callable[[str, str], Any]:
    """``visit(page, viewport)``: the page's measurements, each page and width loaded once."""
    return functools.cache(functools.partial(_visit, browser, base_url, screenshots))


@pytest.fixture(params=list(VIEWPORTS))
def viewport(request: pytest.FixtureRequest) -> str:
    return request.param


_pages = pytest.mark.parametrize("page", PAGES, ids=[_page_id(p) for p in PAGES])


@_pages
def test_page_renders(visit: Callable[[str, str], Any], page: str, viewport: str) -> None:
    seen = visit(page, viewport)
    assert seen["status"] == 200
    for figure in seen["figures"]:
        assert figure["width"] > 50, figure["label"]
        assert figure["height"] > 30, figure["label"]
    if page in MATHS:
        assert seen["typeset"] >= MATHS[page]
        assert seen["texErrors"] == 0  # no TeX errors
    # The repository link makes Material ask api.github.com for stars and forks; it is
    # blocked here (no network) and is the only request allowed to leave the site.
    external = seen["external"]
    assert all(u.startswith("https://api.github.com/") for u in external), external
    unexpected = [e for e in seen["errors"] if "net::ERR_FAILED" not in e or not external]
    assert not unexpected, unexpected


@_pages
def test_display_maths_keep_their_width_and_fit(
    visit: Callable[[str, str], Any], page: str, viewport: str
) -> None:
    seen = visit(page, viewport)
    for formula in seen["maths"]:
        where = f"{formula['tex']!r} at {seen['viewport']['width']} px"
        assert formula["natural"] > 0, where
        assert formula["width"] >= formula["natural"] - _SUBPIXEL, (
            f"{where} is drawn {formula['width']:.1f} px wide, its natural width is "
            f"{formula['natural']:.1f} px"
        )
        # Not shrunk, so it must fit: a long formula is written on several lines.
        clipped = (
            f"{where} is {formula['width']:.0f} px wide, its box shows "
            f"{formula['room']:.0f} px: break it into lines (aligned, gathered)"
        )
        assert not formula["clipped"], clipped
        assert not formula["scrolls"], clipped
    assert seen["pageWidth"] <= seen["viewport"]["width"], "the page scrolls sideways"


@_pages
def test_figures_fit_the_column(visit: Callable[[str, str], Any], page: str, viewport: str) -> None:
    seen = visit(page, viewport)
    column = seen["column"]
    for figure in seen["figures"]:
        assert figure["width"] <= column["width"] + _SUBPIXEL, figure["label"]
        assert figure["left"] >= column["left"] - _SUBPIXEL, figure["label"]
        assert figure["right"] <= column["right"] + _SUBPIXEL, figure["label"]
        assert figure["right"] <= seen["viewport"]["width"], figure["label"]
    assert seen["pageWidth"] <= seen["viewport"]["width"], "the page scrolls sideways"


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(
            p, marks=pytest.mark.xfail(reason=SMALL_TEXT[p], strict=True, raises=AssertionError)
        )
        if p in SMALL_TEXT
        else p
        for p in PAGES
    ],
    ids=[_page_id(p) for p in PAGES],
)
def test_figure_text_is_legible(visit: Callable[[str, str], Any], page: str, viewport: str) -> None:
    seen = visit(page, viewport)
    least = MIN_TEXT_PX[viewport]
    for figure in seen["figures"]:
        assert figure["shown"], f"{figure['label']}: no text shown"
        # A phone shows a figure's phone layout, a desktop its desktop layout.
        assert figure["layout"] in ("one", viewport), (figure["label"], figure["layout"])
        texts, where = figure["texts"], f"at {seen['viewport']['width']} px"
        if viewport == "phone":  # as the narrowest phone shows it
            texts = [(_on_the_narrowest_phone(px, figure["width"]), t) for px, t in texts]
            where = f"at {NARROWEST_PHONE_PX} px"
        small = [(round(px, 2), text) for px, text in texts if px < least]
        assert not small, f"{figure['label']}: text below {least} px {where}: {small}"


@pytest.mark.parametrize(
    ("width", "layout"),
    [(PHONE_LAYOUT_UP_TO_PX, "phone"), (PHONE_LAYOUT_UP_TO_PX + 1, "desktop")],
    ids=["last-phone-width", "first-desktop-width"],
)
def test_the_layouts_switch_where_both_stay_legible(
    browser: Any, base_url: str, width: int, layout: str
) -> None:
    # On either side of the switch the figure fills most of the column: the narrowest the
    # desktop layout gets, and the widest the phone layout gets.
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        tab = context.new_page()
        tab.route(
            "**/*",
            lambda r: r.continue_() if r.request.url.startswith(base_url) else r.abort(),
        )
        tab.goto(base_url + "lookup-is-a-matmul/", wait_until="load")
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        tab.evaluate("() => MathJax.startup.promise")
        seen = tab.evaluate(_MEASURE)
    finally:
        context.close()
    shown = {f["layout"] for f in seen["figures"]}
    assert shown <= {"one", layout}, shown
    assert layout in shown, shown
    for figure in seen["figures"]:
        small = [(round(px, 2), text) for px, text in figure["texts"] if px < 10.0]
        assert not small, f"{figure['label']} at {width} px: {small}"


def test_the_home_page_shows_a_figure_on_its_first_screen(
    visit: Callable[[str, str], Any],
) -> None:
    seen = visit("", "desktop")
    assert seen["figures"], "the home page has no figure"
    first = seen["figures"][0]
    assert first["top"] < seen["viewport"]["height"], (
        f"the first figure starts {first['top']:.0f} px down, below the first screen "
        f"({seen['viewport']['height']} px)"
    )


# The efficiency page's tables, details opened, as wide as the browser lays them out.
_TABLE_WIDTHS = (
    "() => {\n  "
    + _OPEN_DETAILS
    + """
    return Array.from(document.querySelectorAll("article table"), (t) => ({
        width: t.scrollWidth, head: t.rows[0].innerText.replace(/\\s+/g, " ").slice(0, 60)}));
}"""
)


def test_efficiency_tables_fit_1000_px(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        tab = context.new_page()
        tab.route(
            "**/*",
            lambda r: r.continue_() if r.request.url.startswith(base_url) else r.abort(),
        )
        tab.goto(base_url + "efficiency/", wait_until="load")
        tables = tab.evaluate(_TABLE_WIDTHS)
    finally:
        context.close()
    assert len(tables) >= 5
    assert not [t for t in tables if t["width"] > 1000], tables
