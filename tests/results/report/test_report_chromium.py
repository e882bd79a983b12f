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
--part incidents: a cluster whose latest run fails (RANKS_MISSING), with failures that are not
  bandwidth (TRANSPORT_INIT_FAILED over 4 runs, then cleared) and three hosts, next to a healthy
  one (make_verdicts.incident_fleet, on a real 3-rank verdict), laid out as launch leaves its runs
  (ncclsmoke-runs/launch-*/verdict.json + verdict.rank<N>.json) and imported with `history import
  ncclsmoke-runs` (one line of counts, nothing on stderr), reported with --verdict-url. Asserts the
  red state (chip, box and "now" line: data and computed colours; the socket key not green), each
  incident with the run that cleared it, the per-host view by code, one RANKS_MISSING row for
  "1 of 2" and "1 of 3", a hint on every findings row, a link per run; and, measured in Chromium
  by bounding boxes (chromium_check.layout_probe), a full-width page, no two <text> labels of any
  chart overlapping and no date cell wrapping. docs/report-example.{html,png} are this part's page
  and screenshot (`--part incidents --keep DIR`, then incidents.{html,png} copied there).
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


def layout_checks(chromium, html, size, what):
    """Chromium's layout of the page: full width, no two chart labels or page labels overlapping,
    no date cell on more than one line. Returns the probe's result."""
    lay = chromium_check.layout_probe(chromium, html, size)
    check(lay["main_width"] >= 0.95 * lay["vw"],
          f"{what}: the page uses the full width ({lay['main_width']:.0f} of {lay['vw']} px)")
    check(lay["svg_texts"] > 20 and not lay["overlaps"],
          f"{what}: no two of {lay['svg_texts']} chart labels overlap ({lay['overlaps'][:3]})")
    check(not lay["html_overlaps"],
          f"{what}: no two of {lay['html_labels']} page labels (counts, chips, tags, badges) "
          f"overlap ({lay['html_overlaps'][:3]})")
    check(lay["date_cells"] > 0 and not lay["wrapped_dates"],
          f"{what}: no date cell wraps ({lay['date_cells']} cells; {lay['wrapped_dates'][:3]})")
    return lay


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
    bandwidth = [i for i in dom.incidents if i.get("data-kind") == "bandwidth"]
    want = [[i["data-first-run"], i["data-last-run"], int(i["data-runs"])]
            for i in reversed(bandwidth)]  # the page lists newest first
    check(want == exp["incidents"],
          f"one incident per step change: {len(exp['incidents'])} expected {exp['incidents']}, "
          f"page has {want}")
    nreg = len(exp["regressions"])
    check(sum(int(i["data-runs"]) for i in bandwidth) == nreg,
          f"the bandwidth incidents hold every regression run ({nreg})")
    failures_ = [i for i in dom.incidents if i.get("data-kind") == "failure"]
    check(len(failures_) == 1 and failures_[0].get("data-codes") == "TRANSPORT_INIT_FAILED",
          f"the TRANSPORT_INIT_FAILED run is a failure incident ({failures_})")
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
    layout_checks(chromium, html, (1280, 2000), "single")
    return [(html, "report.html"), (png, "report.png")]


def fleet_dom_checks(dom, expected, what):
    names = list(expected)
    check(sorted(dom.clusters) == sorted(names),
          f"{what}: one section per cluster {sorted(names)} (got {dom.clusters})")
    for c, e in expected.items():
        inc = [i for i in dom.incidents if i["cluster"] == c and i.get("data-kind") == "bandwidth"]
        check(len(inc) == e["incidents"],
              f"{what}: {c}: {e['incidents']} incident(s) (got {len(inc)}: "
              f"{[(i['data-first-run'], i['data-runs']) for i in inc]})")
        if "runs" in e:
            check(sorted(int(i["data-runs"]) for i in inc) == sorted(e["runs"]),
                  f"{what}: {c}: incident run counts {sorted(e['runs'])}")
        ongoing = sum(i["data-ongoing"] == "true" for i in inc)
        check(ongoing == e["ongoing"], f"{what}: {c}: {e['ongoing']} ongoing (got {ongoing})")
        if "failure_runs" in e:
            fi = [int(i["data-runs"]) for i in dom.incidents
                  if i["cluster"] == c and i.get("data-kind") == "failure"]
            check(fi == e["failure_runs"],
                  f"{what}: {c}: failure incidents of {e['failure_runs']} runs (got {fi})")
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
    layout_checks(chromium, html, (1280, 2600), "fleet page")
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
        # eu-west's two newest runs end in TRANSPORT_TIMEOUT (error): a failure, still ongoing
        expected[c]["failure_runs"] = [2] if c == "eu-west" else []
    fleet_dom_checks(dom, expected, "fleet import")
    one = os.path.join(work, "one.html")
    p = run([args.binary, "report", "--history", db, "--cluster", "eu-west", "--html", one])
    d1 = chromium_check.summarize_dom(open(one, encoding="utf-8").read())
    check(p.returncode == 0 and d1.clusters == ["eu-west"], f"--cluster eu-west: one section "
          f"({d1.clusters})")
    return [(html, "fleet-import.html"), (png, "fleet-import.png")]


RED, GREEN = "rgb(198, 40, 40)", "rgb(46, 125, 50)"
VERDICT_URL = "https://ci.example/ncclsmoke/{run_id}.json"


def part_incidents(args, chromium, work):
    template = make_verdicts.real_template(args.binary, work, ranks=3)
    prepared = make_verdicts.prepare(template)
    n = 30
    fl = make_verdicts.incident_fleet(prepared, n, time.time() - 3600, 4 * 86400)
    db = os.path.join(work, "incidents.db")
    paths = {}
    for cluster, (docs, _) in fl.items():
        validated = make_verdicts.validate(docs)
        if validated is not None:
            print(f"{cluster}: {validated} generated verdicts validate against verdict.schema.json")
        tree, p = make_verdicts.write_run_tree(docs, os.path.join(work, "tree-" + cluster))
        paths.update(p)
        env = dict(os.environ, NCCLSMOKE_CLUSTER=cluster)
        r = run([args.binary, "history", "import", "--history", db, tree], env=env)
        lines = r.stdout.strip().splitlines()
        locals_ = sum(sum(1 for x in d["ranks"] if x.get("status") == "joined") for d in docs)
        check(r.returncode == 0 and len(lines) == 1 and not r.stderr.strip(),
              f"import of {cluster}'s run tree: exit 0, one line, nothing on stderr "
              f"(got {r.returncode}: {r.stdout!r} {r.stderr[-500:]!r})")
        check(f"{n} runs added, 0 already stored, {locals_} local skipped" in r.stdout,
              f"import of {cluster}: {n} runs added, {locals_} local verdicts counted ({r.stdout.strip()})")
    html = os.path.join(work, "incidents.html")
    r = run([args.binary, "report", "--history", db, "--since", "14d", "--html", html,
             "--verdict-url", VERDICT_URL, "--title", "ncclsmoke regression report"])
    check(r.returncode == 0, f"report exits 0 ({r.stderr.strip()})")
    png = os.path.join(work, "incidents.png")
    st, dom = render(chromium, html, png, (1280, 2600))
    paint_checks(st, "incidents")
    check(st["near"]["#c62828"] > 200, "incidents: fail-red is painted")
    east, west = fl["gpu-east"][1], fl["gpu-west"][1]

    # The red state: the chip, the box and the "now" line; the socket key is not shown green.
    chips = {c["data-cluster"]: c for c in dom.chips}
    check(chips.get("gpu-east", {}).get("data-state") == "fail" and
          chips.get("gpu-west", {}).get("data-state") == "pass",
          f"chips: gpu-east fail, gpu-west pass ({[(k, v.get('data-state')) for k, v in chips.items()]})")
    now = {x["cluster"]: x for x in dom.now}
    check(now.get("gpu-east", {}).get("data-state") == "fail" and
          now["gpu-east"].get("data-run") == east["latest_run"],
          f"gpu-east: now is fail, from its latest run {east['latest_run']} ({now.get('gpu-east')})")
    check(now.get("gpu-west", {}).get("data-state") == "pass", "gpu-west: now is pass")
    lat = [x for x in dom.latest if x["cluster"] == "gpu-east"]
    check(len(lat) == 1 and lat[0].get("data-shown") == "not-measured" and
          lat[0].get("data-state") == "ok" and lat[0].get("data-run") == east["latest_run"] and
          lat[0].get("data-unmeasured-after") == "2",
          f"gpu-east: socket's last number was in band, not shown green over the 2 failed runs, "
          f"which it quotes ({lat})")

    # Incidents: each failure and bandwidth step, with the run that cleared it.
    for kind in ("failure", "bandwidth"):
        got = [[i["data-first-run"], i["data-last-run"], int(i["data-runs"]),
                i["data-cleared-by"] or None]
               for i in reversed(dom.incidents)
               if i["cluster"] == "gpu-east" and i.get("data-kind") == kind]
        check(got == east[f"{kind}_incidents"],
              f"gpu-east: {kind} incidents {east[f'{kind}_incidents']} (got {got})")
    codes = [i.get("data-codes") for i in dom.incidents
             if i["cluster"] == "gpu-east" and i.get("data-kind") == "failure"]
    check(sorted(codes) == ["RANKS_MISSING", "RANKS_MISSING", "TRANSPORT_INIT_FAILED"],
          f"gpu-east: failure incidents' codes ({codes})")
    tif = [i for i in dom.incidents if i.get("data-codes") == "TRANSPORT_INIT_FAILED"]
    check(tif and tif[0].get("data-hosts") == "east-node-c",
          f"the TRANSPORT_INIT_FAILED incident names its host ({tif})")
    check(not [i for i in dom.incidents if i["cluster"] == "gpu-west"], "gpu-west: no incident")

    # The per-host view: three hosts by code, and the findings that named none.
    hosts = {h["data-host"]: h["codes"] for h in dom.host_rows if h["cluster"] == "gpu-east"}
    check(hosts == east["hosts"], f"gpu-east: hosts by code {east['hosts']} (got {hosts})")

    # Findings: grouped by code and subject, never by text; each with a hint.
    rm = [c for c in dom.finding_codes if c == ("gpu-east", "RANKS_MISSING")]
    check(len(rm) == 1, f"gpu-east: one RANKS_MISSING row for '1 of 2' and '1 of 3' ({len(rm)})")
    check(dom.hints and all(h.strip() for h in dom.hints),
          f"every findings row has a hint ({len(dom.hints)} rows, {sum(1 for h in dom.hints if not h.strip())} empty)")

    # The run list: every run, each linked to its verdict through --verdict-url.
    rows = [x for x in dom.run_rows if x["cluster"] == "gpu-east"]
    check([x["data-run"] for x in rows] == list(reversed(east["run_ids"])),
          f"gpu-east: the run list has every run, newest first ({len(rows)} of {n})")
    bad = [x for x in rows if x["href"] != VERDICT_URL.replace("{run_id}", x["data-run"])]
    check(rows and not bad, f"each run links to its verdict ({bad[:2]})")
    check(not dom.fetching and dom.scripts == 0, f"nothing fetches, no script ({dom.fetching[:3]})")

    # Laid out by Chromium: full width, no overlapping labels, dates on one line, colours.
    for size in ((1280, 2600), (1400, 2600), (1000, 2600)):
        what = f"incidents at {size[0]} px"
        lay = layout_checks(chromium, html, size, what)
        check(lay["html_labels"] > 2 * n and lay["date_cells"] > 2 * n,
              f"{what}: the labels and dates measured include the run list's "
              f"({lay['html_labels']} labels, {lay['date_cells']} dates)")
        chip = {c["cluster"]: c for c in lay["chips"]}
        box = {b["cluster"]: b for b in lay["boxes"]}
        check(chip["gpu-east"]["border"] == RED and box["gpu-east"]["border"] == RED and
              box["gpu-east"]["now_border"] == RED and "failing now" in chip["gpu-east"]["text"],
              f"{what}: gpu-east is painted red: chip, box, now line ({chip['gpu-east']}, "
              f"{box['gpu-east']})")
        check(chip["gpu-west"]["border"] == GREEN and box["gpu-west"]["border"] == GREEN and
              "ok now" in chip["gpu-west"]["text"],
              f"{what}: gpu-west is painted green ({chip['gpu-west']})")
        shown = [r for r in lay["run_rows"] if r["height"] > 0 and r["run"] in r["text"]]
        check(len(shown) == len(lay["run_rows"]) == 2 * n,
              f"{what}: every run's row is laid out with its id, no hover needed "
              f"({len(shown)} of {len(lay['run_rows'])})")

    # Without --verdict-url: each run links to the verdict.json the import read.
    plain = os.path.join(work, "incidents-plain.html")
    r = run([args.binary, "report", "--history", db, "--since", "14d", "--html", plain])
    d2 = chromium_check.summarize_dom(open(plain, encoding="utf-8").read())
    bad = [x for x in d2.run_rows if x["href"] != "file://" + paths[x["data-run"]]]
    check(r.returncode == 0 and d2.run_rows and not bad,
          f"without --verdict-url each run links to its imported verdict.json ({bad[:2]})")
    return [(html, "incidents.html"), (png, "incidents.png")]


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
                  "fleet-import": part_fleet_import, "incidents": part_incidents}[part]
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
