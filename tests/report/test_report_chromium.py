#!/usr/bin/python3
"""The report page in headless Chromium (Debian's `chromium`): a history imported from generated
verdicts (made from a real launch), `ncclsmoke report --html`, then
  - a 1280x2000 screenshot that is not blank: enough non-white pixels, many distinct colours, and
    the verdict colours of the charts (pass green, fail red) actually painted;
  - the DOM after Chromium parsed it: one svg.busbw-chart per transport with data-transport,
    points carrying data-verdict, every regression in #regressions, the findings rows, the
    timeline cells; no <script>/<img> element although the history holds such text, and no
    element that would fetch anything (src/href).
Exits 77 only when chromium is absent. Chromium runs with a temporary profile and is killed on
timeout.

    /usr/bin/python3 tests/report/test_report_chromium.py --binary build/ncclsmoke [--keep DIR]
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium_check  # noqa: E402
from report_fixture import build_history, check, failures, run  # noqa: E402

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--keep", help="copy report.html and report.png here")
    args = ap.parse_args()
    chromium = chromium_check.find_chromium()
    if not chromium:
        print("SKIP: chromium is not installed (Debian package 'chromium')")
        return 77
    work = tempfile.mkdtemp(prefix="ncclsmoke-report-chromium-")
    try:
        db, exp = build_history(args.binary, work, n=80)
        html = os.path.join(work, "report.html")
        p = run([args.binary, "report", "--history", db, "--since", "14d", "--html", html])
        check(p.returncode == 0, f"report exits 0 (got {p.returncode}: {p.stderr.strip()})")

        png = os.path.join(work, "report.png")
        chromium_check.screenshot(chromium, html, png)
        st = chromium_check.pixel_stats(png, near=("#2e7d32", "#c62828", "#ef8f00"))
        total = st["width"] * st["height"]
        print(f"screenshot {st['width']}x{st['height']}: {st['non_white']} non-white pixels "
              f"({100 * st['non_white'] / total:.1f}%), {st['distinct']} distinct colours, "
              f"verdict colours {st['near']}")
        check((st["width"], st["height"]) == (1280, 2000), "screenshot is 1280x2000")
        check(st["non_white"] > total * 0.03, "screenshot is not blank (>3% non-white)")
        check(st["distinct"] >= 50, "screenshot has many colours (>=50)")
        check(st["near"]["#2e7d32"] > 200, "pass-green is painted")
        check(st["near"]["#c62828"] > 200, "fail-red is painted")

        dom = chromium_check.summarize_dom(chromium_check.dump_dom(chromium, html))
        nreg = len(exp["regressions"])
        check(dom.charts == ["socket"],
              f"one busbw chart, data-transport=socket (got {dom.charts})")
        check(dom.chart_points.get("pass", 0) > 10 and dom.chart_points.get("fail", 0) > 0 and
              dom.chart_points.get("degraded", 0) > 0,
              f"chart points carry their verdict ({dom.chart_points})")
        check(len(dom.regression_items) == nreg and
              dom.regression_items[0] == exp["regressions"][-1],
              f"#regressions lists all {nreg}, newest first (got {len(dom.regression_items)})")
        check(dom.findings_rows >= nreg, f"#findings has rows ({dom.findings_rows})")
        check(dom.timeline_cells == exp["n"],
              f"#timeline has one cell per run ({dom.timeline_cells} of {exp['n']})")
        check(dom.scripts == 0 and dom.imgs == 0,
              f"no script/img element from hostile text (scripts {dom.scripts}, imgs {dom.imgs})")
        check("<script>alert(1)</script>" in dom.all_text,
              "the hostile message is shown as text")
        check(not dom.fetching, f"nothing fetches: {dom.fetching[:3]}")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            shutil.copy(html, os.path.join(args.keep, "report.html"))
            shutil.copy(png, os.path.join(args.keep, "report.png"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
