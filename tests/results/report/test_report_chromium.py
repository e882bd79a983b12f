#!/usr/bin/python3
"""The report page in headless Chromium (Debian's `chromium`).

--part single (default, with fleet-page): a history imported from generated verdicts (made from a
  real launch), `ncclsmoke report --html`, then
  - a 1280x2000 screenshot that is not blank: enough non-white pixels, many distinct colours, and
    the verdict colours of the charts (pass green, fail red) actually painted;
  - the DOM after Chromium parsed it: one svg.busbw-chart per transport with data-transport,
    points carrying data-verdict, exactly one li.incident per step change (first/last run and run
    count as make_verdicts computed them), the busbw-versus-size chart of the latest run with its
    gate mark, the findings rows, the timeline cells; no <script>/<img> element although the
    history holds such text, and no element that would fetch anything (src/href).
--part fleet-page: the page of an in-memory three-cluster fleet (report_fleet_page, rows built as
  the history returns them): one section per cluster, the incidents per cluster, sticky "Now",
  the size curve per cluster with the gate mark on the in-place row, repeats grouped.
--part fleet-import: three clusters imported with `NCCLSMOKE_CLUSTER=<name> ncclsmoke history
  import`, reported in one page. Needs the history's cluster column: without it the part exits 77
  (skipped, never passed) and says so.
Exits 77 when chromium is absent. Chromium runs with a temporary profile and is killed on timeout.

    /usr/bin/python3 tests/results/report/test_report_chromium.py --binary build/ncclsmoke \
        --fleet-page build/report_fleet_page [--part single,fleet-page] [--keep DIR]
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium_check  # noqa: E402
import make_verdicts  # noqa: E402
from report_fixture import build_history, check, failures, run  # noqa: E402


def paint_checks(st, what):
    total = st["width"] * st["height"]
    print(f"{what}: screenshot {st['width']}x{st['height']}: {st['non_white']} non-white pixels "
          f"({100 * st['non_white'] / total:.1f}%), {st['distinct']} distinct colours, "
          f"verdict colours {st['near']}")
    check(st["non_white"] > total * 0.03, f"{what}: screenshot is not blank (>3% non-white)")
    check(st["distinct"] >= 50, f"{what}: screenshot has many colours (>=50)")
    check(st["near"]["#2e7d32"] > 200, f"{what}: pass-green is painted")


def render(chromium, html, png, size):
    chromium_check.screenshot(chromium, html, png, size=size)
    st = chromium_check.pixel_stats(png, near=("#2e7d32", "#c62828", "#ef8f00"))
    dom = chromium_check.summarize_dom(chromium_check.dump_dom(chromium, html))
    return st, dom


def part_single(args, chromium, work):
    db, exp = build_history(args.binary, work, n=80)
    html = os.path.join(work, "report.html")
    p = run([args.binary, "report", "--history", db, "--since", "14d", "--html", html])
    check(p.returncode == 0, f"report exits 0 (got {p.returncode}: {p.stderr.strip()})")
    png = os.path.join(work, "report.png")
    st, dom = render(chromium, html, png, (1280, 2000))
    paint_checks(st, "single")
    check((st["width"], st["height"]) == (1280, 2000), "screenshot is 1280x2000")
    check(st["near"]["#c62828"] > 200, "fail-red is painted")

    check(dom.charts == ["socket"], f"one busbw chart, data-transport=socket (got {dom.charts})")
    check(dom.chart_points.get("pass", 0) > 10 and dom.chart_points.get("fail", 0) > 0 and
          dom.chart_points.get("degraded", 0) > 0,
          f"chart points carry their verdict ({dom.chart_points})")
    want = [[i["data-first-run"], i["data-last-run"], int(i["data-runs"])]
            for i in reversed(dom.incidents)]  # the page lists newest first
    check(want == exp["incidents"],
          f"one incident per step change: {len(exp['incidents'])} expected {exp['incidents']}, "
          f"page has {want}")
    nreg = len(exp["regressions"])
    check(sum(int(i["data-runs"]) for i in dom.incidents) == nreg,
          f"the incidents hold every regression run ({nreg})")
    check(len(dom.size_charts) == 1 and dom.size_charts[0].get("data-transport") == "socket"
          and dom.size_charts[0]["points"] >= 4 and dom.size_charts[0]["marks"] == 1,
          f"a busbw-versus-size chart of the latest run with one gate mark ({dom.size_charts})")
    check(dom.findings_rows >= 3, f"the findings table has rows ({dom.findings_rows})")
    check(dom.timeline_cells == exp["n"],
          f"the timeline has one cell per run ({dom.timeline_cells} of {exp['n']})")
    check(dom.scripts == 0 and dom.imgs == 0,
          f"no script/img element from hostile text (scripts {dom.scripts}, imgs {dom.imgs})")
    check("<script>alert(1)</script>" in dom.all_text, "the hostile message is shown as text")
    check(not dom.fetching, f"nothing fetches: {dom.fetching[:3]}")
    return [(html, "report.html"), (png, "report.png")]


def fleet_dom_checks(dom, expected, what):
    names = list(expected)
    check(sorted(dom.clusters) == sorted(names),
          f"{what}: one section per cluster {sorted(names)} (got {dom.clusters})")
    for c, e in expected.items():
        inc = [i for i in dom.incidents if i["cluster"] == c]
        check(len(inc) == e["incidents"],
              f"{what}: {c}: {e['incidents']} incident(s) (got {len(inc)}: "
              f"{[(i['data-first-run'], i['data-runs']) for i in inc]})")
        if "runs" in e:
            check(sorted(int(i["data-runs"]) for i in inc) == sorted(e["runs"]),
                  f"{what}: {c}: incident run counts {sorted(e['runs'])}")
        ongoing = sum(i["data-ongoing"] == "true" for i in inc)
        check(ongoing == e["ongoing"], f"{what}: {c}: {e['ongoing']} ongoing (got {ongoing})")
        lat = [l for l in dom.latest if l["cluster"] == c]
        check(len(lat) == 1 and lat[0]["data-state"] == e["now"],
              f"{what}: {c}: Now says {e['now']} "
              f"(got {[l['data-state'] for l in lat]})")
        if e.get("unmeasured_after"):
            check(lat and lat[0].get("data-unmeasured-after") == str(e["unmeasured_after"]),
                  f"{what}: {c}: Now is sticky over {e['unmeasured_after']} unmeasured runs")
        sc = [x for x in dom.size_charts if x["cluster"] == c]
        check(len(sc) == 1 and sc[0]["points"] >= 8 and sc[0]["marks"] == 1,
              f"{what}: {c}: one size curve with its gate mark ({sc})")
        if sc and "curve_run" in e:
            check(sc[0].get("data-run") == e["curve_run"],
                  f"{what}: {c}: the curve is the latest run that measured ({e['curve_run']})")
        if "finding_rows" in e:
            got = dom.per_cluster.get(c, {}).get("findings_rows")
            check(got == e["finding_rows"],
                  f"{what}: {c}: per-rank repeats grouped into {e['finding_rows']} row(s) "
                  f"(got {got})")


def part_fleet_page(args, chromium, work):
    html = os.path.join(work, "fleet.html")
    p = run([args.fleet_page, html])
    check(p.returncode == 0, f"report_fleet_page exits 0 ({p.stderr.strip()})")
    expected = json.loads(p.stdout)["clusters"]
    png = os.path.join(work, "fleet.png")
    st, dom = render(chromium, html, png, (1280, 2600))
    paint_checks(st, "fleet page")
    check(st["near"]["#c62828"] > 200, "fleet page: fail-red is painted")
    fleet_dom_checks(dom, expected, "fleet page")
    gm = [x.get("mark_in_place") for x in dom.size_charts]
    check(gm and all(m == "true" for m in gm),
          f"fleet page: the gate mark sits on the in-place row, the lower one ({gm})")
    check(dom.scripts == 0 and not dom.fetching, "fleet page: no script, nothing fetched")
    return [(html, "fleet.html"), (png, "fleet.png")]


def part_fleet_import(args, chromium, work):
    template = make_verdicts.real_template(args.binary, work)
    prepared = make_verdicts.prepare(template)
    n = 40
    fl = make_verdicts.fleet(prepared, n, time.time() - 3600, 5 * 86400)
    db = os.path.join(work, "fleet.db")
    for cluster, (docs, _) in fl.items():
        vdir = os.path.join(work, "v-" + cluster)
        make_verdicts.write_all(docs, vdir)
        env = dict(os.environ, NCCLSMOKE_CLUSTER=cluster)
        p = run([args.binary, "history", "import", "--history", db, vdir], env=env)
        check(p.returncode == 0, f"import {cluster}: exit 0 ({p.stdout.strip()} {p.stderr.strip()})")
    con = sqlite3.connect(db)
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
        stored = sorted({r[0] for r in con.execute("SELECT cluster FROM runs")}) \
            if "cluster" in cols else []
    finally:
        con.close()
    if sorted(stored) != sorted(fl):
        print(f"SKIP  fleet-import: the history does not store the cluster yet (runs columns "
              f"{cols}, clusters stored {stored}); this part needs the cluster column "
              f"(publish --cluster / NCCLSMOKE_CLUSTER)")
        return None
    html = os.path.join(work, "fleet-import.html")
    p = run([args.binary, "report", "--history", db, "--since", "14d", "--html", html])
    check(p.returncode == 0, f"fleet report exits 0 ({p.stderr.strip()})")
    png = os.path.join(work, "fleet-import.png")
    st, dom = render(chromium, html, png, (1280, 2600))
    paint_checks(st, "fleet import")
    expected = {}
    for c, (docs, e) in fl.items():
        expected[c] = {"incidents": len(e["incidents"]),
                       "runs": [x[2] for x in e["incidents"]],
                       "ongoing": 1 if c in ("us-east", "eu-west") else 0,
                       "now": e["now"], "unmeasured_after": e["unmeasured_after"]}
        if c == "ap-south":
            expected[c]["finding_rows"] = 1
    fleet_dom_checks(dom, expected, "fleet import")
    one = os.path.join(work, "one.html")
    p = run([args.binary, "report", "--history", db, "--cluster", "eu-west", "--html", one])
    d1 = chromium_check.summarize_dom(open(one, encoding="utf-8").read())
    check(p.returncode == 0 and d1.clusters == ["eu-west"], f"--cluster eu-west: one section "
          f"({d1.clusters})")
    return [(html, "fleet-import.html"), (png, "fleet-import.png")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fleet-page", help="the report_fleet_page executable")
    ap.add_argument("--part", default="single,fleet-page")
    ap.add_argument("--keep", help="copy the pages and screenshots here")
    args = ap.parse_args()
    chromium = chromium_check.find_chromium()
    if not chromium:
        print("SKIP: chromium is not installed (Debian package 'chromium')")
        return 77
    parts = args.part.split(",")
    work = tempfile.mkdtemp(prefix="ncclsmoke-report-chromium-")
    skipped = []
    try:
        for part in parts:
            fn = {"single": part_single, "fleet-page": part_fleet_page,
                  "fleet-import": part_fleet_import}[part]
            if part == "fleet-page" and not args.fleet_page:
                check(False, "--fleet-page is required for part fleet-page")
                continue
            kept = fn(args, chromium, work)
            if kept is None:
                skipped.append(part)
                continue
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for path, name in kept:
                    if os.path.exists(path):
                        shutil.copy(path, os.path.join(args.keep, name))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    if skipped:
        print(f"skipped: {', '.join(skipped)}")
        return 77
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
