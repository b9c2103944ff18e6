"""The built documentation site in a real browser (headless Chromium), with no internet: every
Mermaid diagram is drawn (an SVG, from the Mermaid the site serves itself), and at 1280 px
no table needs a horizontal scrollbar and nothing is cut off without one.

The site is built once (mkdocs build --strict) and served from 127.0.0.1; Chromium resolves
no host name at all, so a script the site took from a CDN would not load. A script added to
each page's head opens the shadow roots the theme draws diagrams in (closed otherwise), and
one at its end writes what it found into the page, which Chromium then dumps."""

from __future__ import annotations

import functools
import html
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from paths import REPO

WIDTH = 1280
# Pages with diagrams, wide tables or long code blocks.
PAGES = ["architecture/", "reference/", "", "benchmarks/", "troubleshooting/", "guide/", "operations/",
         "start/first-job/", "start/install/"]

# Before the theme's bundle: shadow roots open, so the check can look inside the diagrams.
_OPEN_SHADOWS = """<script>
const rendezvousAttach = Element.prototype.attachShadow;
Element.prototype.attachShadow = function (options) { return rendezvousAttach.call(this, {...options, mode: "open"}); };
</script>"""

# After everything: wait until every diagram is drawn (or long enough), then report.
_CHECK = """<script>
const rendezvousDiagrams = DIAGRAMS;
// The nearest ancestor that clips what overflows it (scrolls it, or hides it), else the content column.
function rendezvousClip(element, content) {
  for (let e = element.parentElement; e && e !== content; e = e.parentElement) {
    const x = getComputedStyle(e).overflowX;
    if (x !== "visible") return e;
  }
  return content;
}
function rendezvousReport() {
  const content = document.querySelector(".md-content");
  const article = content.querySelector("article");
  const diagrams = [...document.querySelectorAll("div.mermaid")].map(d => {
    const svg = d.shadowRoot && d.shadowRoot.querySelector("svg");
    const box = svg ? svg.getBoundingClientRect() : null;
    return {svg: !!svg, width: box ? box.width : 0, height: box ? box.height : 0,
            text: svg ? svg.textContent.trim().length : 0};
  });
  // A table scrolls sideways in the theme's wrapper when it is wider than the column. It must
  // wrap instead, unless even its narrowest layout (every cell wrapped) is wider than the column.
  function narrowest(table) {
    const width = table.style.width;
    table.style.width = "min-content";
    const wrapper = getComputedStyle(table.parentElement);
    const found = table.getBoundingClientRect().width + parseFloat(wrapper.paddingLeft) + parseFloat(wrapper.paddingRight);
    table.style.width = width;
    return found;
  }
  const wideTables = [...article.querySelectorAll("table")].map(t => [t, rendezvousClip(t, content)])
    .filter(([t, clip]) => clip.scrollWidth > clip.clientWidth + 1 && narrowest(t) <= clip.clientWidth)
    .map(([t, clip]) => t.querySelector("th, td").textContent.trim() + ": " + clip.scrollWidth + " > " + clip.clientWidth);
  // cut: past the right edge of what clips it, when that does not scroll (or is the column itself)
  const cut = [...article.querySelectorAll("*")].filter(e => {
    const clip = rendezvousClip(e, content);
    const x = getComputedStyle(clip).overflowX;
    if (clip !== content && (x === "auto" || x === "scroll")) return false;
    return e.getBoundingClientRect().right > clip.getBoundingClientRect().right + 1;
  }).filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= rendezvousClip(e, content).getBoundingClientRect().right + 1)
    .map(e => e.tagName + " " + (e.textContent || "").trim().slice(0, 60));
  // a flag or a variable split over two lines in a table cell
  const split = [...article.querySelectorAll("td code, th code")]
    .filter(c => !/\\s/.test(c.textContent) && c.getClientRects().length > 1)
    .map(c => c.textContent);
  const out = document.createElement("pre");
  out.id = "rendezvous-check";
  out.textContent = JSON.stringify({
    undrawn: rendezvousDiagrams - diagrams.filter(d => d.svg).length,
    diagrams, wideTables, cut, split, width: window.innerWidth});
  document.body.appendChild(out);
}
let rendezvousWaits = 0;
(function rendezvousWait() {
  const drawn = [...document.querySelectorAll("div.mermaid")].filter(d => d.shadowRoot && d.shadowRoot.querySelector("svg"));
  if (drawn.length < rendezvousDiagrams && rendezvousWaits++ < 200) setTimeout(rendezvousWait, 100);
  else setTimeout(rendezvousReport, 200);
})();
</script>"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if path.suffix != ".html" or not path.is_file():
            return super().send_head()
        page = path.read_text()
        page = page.replace("<head>", "<head>" + _OPEN_SHADOWS, 1)
        check = _CHECK.replace("DIAGRAMS", str(page.count('<pre class="mermaid">')))
        page = page.replace("</body>", check + "</body>", 1)
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no Chromium here: scripts/setup installs Debian's `chromium` (as root)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site, built from this checkout and served on 127.0.0.1: its base URL."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
                           cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def look(url: str) -> dict:
    """What the check script found on the page at URL, opened WIDTH px wide with no name resolution.
    A browser that dumped no page at all (killed: on a machine short of memory) is started
    again, twice at most; a page dumped without the check's report fails."""
    for _ in range(3):
        # a short path: Chromium's socket in it must fit a Unix socket's 108 bytes
        with tempfile.TemporaryDirectory(prefix="rdv-chromium-", dir="/tmp") as profile:
            shown = subprocess.run(
                [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                 f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                 f"--window-size={WIDTH},1000",
                 # virtual time: the page's timers run as fast as the machine allows, however loaded
                 "--virtual-time-budget=60000", "--dump-dom", url],
                capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": profile})
        if "</html>" in shown.stdout:
            break
    found = re.search(r'<pre id="rendezvous-check">(.*?)</pre>', shown.stdout, re.S)
    assert found, f"the check did not run on {url} (exit {shown.returncode}): {shown.stderr[-3000:]}"
    return json.loads(html.unescape(found[1]))


def _fences(page: str) -> int:
    source = REPO / "docs" / (page.rstrip("/") + ".md" if page and not page.endswith("guide/") else page + "index.md")
    return len(re.findall(r"^```mermaid$", source.read_text(), re.M))


def test_every_diagram_of_architecture_is_drawn_offline(site):
    report = look(site + "architecture/")
    expected = _fences("architecture/")
    assert expected >= 4
    assert report["undrawn"] == 0, f"{report['undrawn']} diagrams left as text: {report}"
    assert len(report["diagrams"]) == expected, report
    for diagram in report["diagrams"]:
        assert diagram["svg"] and diagram["width"] > 100 and diagram["height"] > 50 and diagram["text"] > 0, report


@pytest.mark.parametrize("page", PAGES)
def test_tables_fit_and_nothing_is_cut_or_split_at_1280_px(site, page):
    report = look(site + page)
    assert report["width"] == WIDTH
    assert not report["wideTables"], f"/{page}: tables wider than the page (cut, or scrolled): {report['wideTables']}"
    assert not report["cut"], f"/{page}: cut off with no scrollbar: {report['cut']}"
    assert not report["split"], f"/{page}: identifiers split over two lines in a table: {report['split']}"
