"""Headless Chromium helpers for the report tests: a screenshot and a DOM dump of a local file,
each in a fresh temporary profile, bounded in time (the whole process group is killed on
timeout), and the checks on their results (a PNG decoded with zlib+struct, or Pillow when
present; the DOM parsed with html.parser)."""

import os
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium():
    for n in CHROMIUM_NAMES:
        p = shutil.which(n)
        if p:
            return p
    return None


def _run_chromium(chromium, extra, url, timeout):
    profile = tempfile.mkdtemp(prefix="ncclsmoke-chromium-")
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
            "--disable-background-networking", "--disable-sync", "--mute-audio",
            f"--user-data-dir={profile}"] + extra + [url]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"chromium did not finish within {timeout} s: {' '.join(argv)}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # helpers left behind by the browser, if any
        except ProcessLookupError:
            pass
        shutil.rmtree(profile, ignore_errors=True)
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def screenshot(chromium, html_path, png_path, size=(1280, 2000), timeout=120):
    rc, out, err = _run_chromium(
        chromium, [f"--screenshot={png_path}", f"--window-size={size[0]},{size[1]}"],
        "file://" + os.path.abspath(html_path), timeout)
    if not os.path.exists(png_path):
        raise RuntimeError(f"chromium wrote no screenshot (exit {rc}): {err[-2000:]}")


def dump_dom(chromium, html_path, timeout=120):
    rc, out, err = _run_chromium(chromium, ["--dump-dom"], "file://" + os.path.abspath(html_path),
                                 timeout)
    if rc != 0 or "<html" not in out:
        raise RuntimeError(f"chromium --dump-dom failed (exit {rc}): {err[-2000:]}")
    return out


# Runs inside a copy of the page (the report itself has no script): measures what a reader sees
# and writes it as JSON into <pre id="ncclsmoke-probe">, which --dump-dom then carries out.
_PROBE = r"""
<script>
(function () {
  const out = {vw: window.innerWidth, vh: window.innerHeight};
  const main = document.querySelector('main');
  out.main_width = main ? main.getBoundingClientRect().width : 0;
  const overlaps = [];
  let texts = 0;
  document.querySelectorAll('svg').forEach(function (svg) {
    const boxes = [];
    svg.querySelectorAll('text').forEach(function (t) {
      if (!t.textContent.trim()) return;
      const r = t.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) return;
      boxes.push({t: t.textContent, r: r});
    });
    texts += boxes.length;
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i].r, b = boxes[j].r;
        const ix = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const iy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (ix > 0.5 && iy > 0.5)
          overlaps.push({svg: svg.getAttribute('class'), a: boxes[i].t, b: boxes[j].t,
                         ix: ix, iy: iy});
      }
  });
  out.svg_texts = texts;
  out.overlaps = overlaps;
  // The page's own labels: verdict counts, cluster chips, tags and badges.
  const labels = Array.from(document.querySelectorAll(
      '.count, #clusters li, .tag, .kind, span.verdict, .state')).map(function (el) {
    return {t: el.textContent, r: el.getBoundingClientRect()};
  }).filter(function (b) { return b.r.width > 0 && b.r.height > 0; });
  const html_overlaps = [];
  for (let i = 0; i < labels.length; i++)
    for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i].r, b = labels[j].r;
      const ix = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const iy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (ix > 0.5 && iy > 0.5)
        html_overlaps.push({a: labels[i].t, b: labels[j].t, ix: ix, iy: iy});
    }
  out.html_labels = labels.length;
  out.html_overlaps = html_overlaps;
  const wrapped = [];
  let dates = 0;
  document.querySelectorAll('td.date').forEach(function (td) {
    dates++;
    const range = document.createRange();
    range.selectNodeContents(td);
    const tops = new Set(Array.from(range.getClientRects()).map(function (r) {
      return Math.round(r.top);
    }));
    if (tops.size > 1) wrapped.push(td.textContent);
  });
  out.date_cells = dates;
  out.wrapped_dates = wrapped;
  out.chips = Array.from(document.querySelectorAll('#clusters li')).map(function (li) {
    return {cluster: li.dataset.cluster, state: li.dataset.state,
            border: getComputedStyle(li).borderLeftColor, text: li.textContent};
  });
  out.boxes = Array.from(document.querySelectorAll('section.cluster')).map(function (s) {
    const b = s.querySelector('.regbox');
    const now = s.querySelector('ul.now li');
    return {cluster: s.dataset.cluster, state: b ? b.dataset.state : null,
            border: b ? getComputedStyle(b).borderTopColor : null,
            now_border: now ? getComputedStyle(now).borderLeftColor : null,
            now_text: now ? now.innerText : null};
  });
  out.run_rows = Array.from(document.querySelectorAll('table.runs tr.run')).map(function (tr) {
    const a = tr.querySelector('a');
    const r = tr.getBoundingClientRect();
    return {run: tr.dataset.run, height: r.height, text: tr.innerText,
            href: a ? a.getAttribute('href') : null};
  });
  const pre = document.createElement('pre');
  pre.id = 'ncclsmoke-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def layout_probe(chromium, html_path, size=(1280, 2000), timeout=120):
    """What Chromium laid out for the page at `size`: the viewport and <main> widths, every pair
    of overlapping <text> boxes in each SVG (getBoundingClientRect) and of the page's own labels
    (verdict counts, cluster chips, tags, badges), the td.date cells that wrap
    onto more than one line, the computed colours of the cluster chips, boxes and "now" lines,
    and the run list's rows (height, visible text, link). Measured in a copy of the page with a
    probe script added; the report itself has none."""
    import json
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    probe_path = html_path + ".probe.html"
    with open(probe_path, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", _PROBE + "</body>", 1))
    try:
        rc, out, err = _run_chromium(
            chromium, ["--dump-dom", f"--window-size={size[0]},{size[1]}"],
            "file://" + os.path.abspath(probe_path), timeout)
    finally:
        os.unlink(probe_path)
    start = out.find('<pre id="ncclsmoke-probe">')
    if rc != 0 or start < 0:
        raise RuntimeError(f"chromium layout probe failed (exit {rc}): {err[-2000:]}")
    body = out[start + len('<pre id="ncclsmoke-probe">'):out.index("</pre>", start)]
    import html as _html
    return json.loads(_html.unescape(body))


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG. Pillow when importable,
    else a zlib+struct decoder (all five filter types)."""
    try:
        from PIL import Image
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            data = im.tobytes()
            return w, h, 3, [data[y * w * 3:(y + 1) * w * 3] for y in range(h)]
    except ImportError:
        pass
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError(f"{path}: unsupported PNG (depth {depth}, colour type {ctype})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        cur = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for i in range(bpp, stride):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif ft == 2:
            for i in range(stride):
                cur[i] = (cur[i] + prev[i]) & 255
        elif ft == 3:
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 255
        elif ft == 4:
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                upleft = prev[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + _paeth(left, prev[i], upleft)) & 255
        rows.append(bytes(cur))
        prev = cur
    return w, h, bpp, rows


def pixel_stats(path, near=()):
    """{'width','height','non_white','distinct','near': {hex: count}} over every pixel; `near`
    counts pixels within 40 (sum of |dr|+|dg|+|db|) of each '#rrggbb'."""
    w, h, bpp, rows = decode_png(path)
    targets = [(c, int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)) for c in near]
    colors, non_white = {}, 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            px = row[x:x + 3]
            colors[px] = colors.get(px, 0) + 1
    hits = {c: 0 for c in near}
    for px, n in colors.items():
        r, g, b = px[0], px[1], px[2]
        if r < 245 or g < 245 or b < 245:
            non_white += n
        for c, tr, tg, tb in targets:
            if abs(r - tr) + abs(g - tg) + abs(b - tb) <= 40:
                hits[c] += n
    return {"width": w, "height": h, "non_white": non_white, "distinct": len(colors),
            "near": hits}


class DomSummary(HTMLParser):
    """Counts what the report tests look for in a DOM dump."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, attrs) of open elements
        self.charts = []  # data-transport of each svg.busbw-chart
        self.chart_points = {}  # data-verdict -> count of circle.pt
        self.incidents = []  # attrs of each li.incident inside ul.incidents (+ "cluster")
        self.latest = []  # attrs of each li.latest inside ul.latest (+ "cluster")
        self.size_charts = []  # attrs of each svg.size-chart (+ "cluster", "points", "marks")
        self.clusters = []  # data-cluster of each section.cluster, in page order
        self.per_cluster = {}  # cluster -> {"findings_rows", "timeline_cells", "charts"}
        self.findings_rows = 0  # tr inside table.findings > tbody
        self.timeline_cells = 0  # rect.cell inside div.timeline
        self.scripts = 0
        self.imgs = 0
        self.fetching = []  # elements that would fetch something: src, xlink:href, href but <a>'s
        self.links = []  # href of each <a>: links a reader follows, nothing is fetched
        self.now = []  # attrs of each li.now (+ "cluster")
        self.chips = []  # attrs of each #clusters li
        self.host_rows = []  # attrs of each tr.host (+ "cluster", "codes": {code: runs})
        self.run_rows = []  # attrs of each tr.run (+ "cluster", "href")
        self.hints = []  # text of each td.hint of table.findings (filled as data arrives)
        self.finding_codes = []  # data-code of each findings row, with its cluster
        self.text = []

    def _inside(self, pred):
        return any(pred(t, a) for t, a in self.stack)

    def _cluster(self):
        for t, a in reversed(self.stack):
            if t == "section" and "cluster" in (a.get("class") or "").split():
                return a.get("data-cluster")
        return None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "script":
            self.scripts += 1
        if tag == "img":
            self.imgs += 1
        for k in ("src", "href", "xlink:href"):
            if k in a and not (tag == "a" and k == "href"):
                self.fetching.append(f"<{tag} {k}={a[k]!r}>")
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        cluster = self._cluster()
        if tag == "li" and "now" in cls:
            self.now.append(dict(a, cluster=cluster))
        if tag == "li" and self._inside(lambda t, at: t == "ul" and at.get("id") == "clusters"):
            self.chips.append(dict(a))
        if tag == "tr" and "host" in cls:
            self.host_rows.append(dict(a, cluster=cluster, codes={}))
        if tag == "td" and "hc" in cls and "data-code" in a and self.host_rows:
            self.host_rows[-1]["codes"][a["data-code"]] = int(a.get("data-runs", "0"))
        if tag == "tr" and "run" in cls:
            self.run_rows.append(dict(a, cluster=cluster, href=None))
        if tag == "a" and self.run_rows and self._inside(lambda t, at: t == "tr" and "run" in (
                at.get("class") or "").split()):
            self.run_rows[-1]["href"] = a.get("href")
        if tag == "tr" and "finding" in cls:
            self.finding_codes.append((cluster, a.get("data-code")))
        if tag == "td" and "hint" in cls:
            self.hints.append("")
        if tag == "section" and "cluster" in cls:
            self.clusters.append(a.get("data-cluster"))
            cluster = a.get("data-cluster")
            self.per_cluster[cluster] = {"findings_rows": 0, "timeline_cells": 0, "charts": 0}
        pc = self.per_cluster.get(cluster, {"findings_rows": 0, "timeline_cells": 0, "charts": 0})
        if tag == "svg" and "busbw-chart" in cls:
            self.charts.append(a.get("data-transport"))
            pc["charts"] += 1
        if tag == "svg" and "size-chart" in cls:
            self.size_charts.append(dict(a, cluster=cluster, points=0, marks=0))
        if tag == "circle" and "sz" in cls and self.size_charts and self._inside(
                lambda t, at: t == "svg" and "size-chart" in (at.get("class") or "")):
            self.size_charts[-1]["points"] += 1
        if tag == "g" and "gate-mark" in cls and self.size_charts:
            self.size_charts[-1]["marks"] += 1
            self.size_charts[-1]["mark_in_place"] = a.get("data-in-place")
        if tag == "li" and "incident" in cls and self._inside(
                lambda t, at: t == "ul" and "incidents" in (at.get("class") or "").split()):
            self.incidents.append(dict(a, cluster=cluster))
        if tag == "li" and "latest" in cls and self._inside(
                lambda t, at: t == "ul" and "latest" in (at.get("class") or "").split()):
            self.latest.append(dict(a, cluster=cluster))
        if tag == "circle" and "pt" in cls and self._inside(
                lambda t, at: t == "svg" and "busbw-chart" in (at.get("class") or "")):
            v = a.get("data-verdict")
            self.chart_points[v] = self.chart_points.get(v, 0) + 1
        if tag == "tr" and self._inside(lambda t, at: t == "tbody") and self._inside(
                lambda t, at: t == "table" and "findings" in (at.get("class") or "").split()):
            self.findings_rows += 1
            pc["findings_rows"] += 1
        if tag == "rect" and "cell" in cls and self._inside(
                lambda t, at: t == "div" and "timeline" in (at.get("class") or "").split()):
            self.timeline_cells += 1
            pc["timeline_cells"] += 1
        if tag not in ("meta", "br", "hr", "input", "link", "img", "col", "wbr", "source"):
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        self.text.append(data)
        if self.hints and self.stack and self.stack[-1][0] == "td" and "hint" in (
                self.stack[-1][1].get("class") or "").split():
            self.hints[-1] += data


def summarize_dom(dom):
    s = DomSummary()
    s.feed(dom)
    s.close()
    s.all_text = "".join(s.text)
    return s
