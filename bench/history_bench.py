#!/usr/bin/python3
"""History + report benchmark: N verdicts imported into a fresh history, then the report.

  1. A real verdict from `ncclsmoke launch -n 2 --transports socket` (judged against ci-loopback)
     is the template; N copies vary run_id, started_at, gate busbw, verdict and findings
     (tests/results/report/make_verdicts.py: healthy runs, then a bandwidth regression, an occasional
     SILENT_FALLBACK and inconclusive run), spread over the last 13 days. A sample (or all, with
     --validate all) is checked against results/verdict/verdict.schema.json with python3-jsonschema.
  2. Times `ncclsmoke history import --history DB DIR` (one directory argument: no argv limit).
  3. Times `ncclsmoke report --history DB --since 14d --html F --markdown F`, R times (median).
  4. PostgreSQL (--pg-runs M, 0 skips): a throw-away server from scripts/postgres-local.sh, the
     first M of the same verdicts imported with `history import --history URL`, then `history
     list` and `report` over that URL (the report is timed where `report` accepts a URL).

Goals: 100,000 runs import and report from SQLite in under 15 s (10,000 in under 5 s), and
10,000 import into PostgreSQL in under 10 s, on the CI machine. The script prints the figures; it
never fails on time.

    /usr/bin/python3 bench/history_bench.py [--build-dir build] [--runs 100000] [--pg-runs 10000]
        [--repeat 3] [--validate sample|all|none] [--keep DIR] [--json-out FILE]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "results", "report"))
import make_verdicts  # noqa: E402


def timed(argv, timeout=600):
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return wall, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--binary", help="ncclsmoke binary (default BUILD_DIR/ncclsmoke)")
    ap.add_argument("--runs", type=int, default=100000, help="SQLite: runs imported and reported")
    ap.add_argument("--pg-runs", type=int, default=10000,
                    help="PostgreSQL: the first M of them imported into a throw-away server "
                         "(0: skip; skipped when the postgres binaries are absent)")
    ap.add_argument("--repeat", type=int, default=3, help="report runs (median is printed)")
    ap.add_argument("--validate", choices=("sample", "all", "none"), default="sample")
    ap.add_argument("--keep", help="copy the history, report.html and report.md here")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    binary = args.binary or os.path.join(args.build_dir, "ncclsmoke")
    if not os.access(binary, os.X_OK):
        print(f"error: {binary}: no ncclsmoke binary (build it, or pass --binary)")
        return 2

    work = tempfile.mkdtemp(prefix="ncclsmoke-history-bench-")
    try:
        t0 = time.monotonic()
        template = make_verdicts.real_template(binary, work)
        prepared = make_verdicts.prepare(template)
        docs, exp = make_verdicts.scenario(prepared, args.runs, time.time() - 600, 13 * 86400)
        t_gen = time.monotonic() - t0

        t0 = time.monotonic()
        sample = {"all": docs, "none": [],
                  "sample": docs[::max(1, len(docs) // 200)] +
                  [d for d in docs if d["verdict"] != "pass"][:200]}[args.validate]
        validated = make_verdicts.validate(sample) if sample else 0
        t_val = time.monotonic() - t0

        vdir = os.path.join(work, "verdicts")
        t0 = time.monotonic()
        make_verdicts.write_all(docs, vdir)
        os.sync()  # the generator's ~1.2 GB of dirty pages: flushed here, not during the import
        t_write = time.monotonic() - t0
        bytes_in = sum(os.path.getsize(os.path.join(vdir, f)) for f in os.listdir(vdir))

        db = os.path.join(work, "history.db")
        t_import, out = timed([binary, "history", "import", "--history", db, vdir, "--quiet"]
                              if _has_quiet(binary) else
                              [binary, "history", "import", "--history", db, vdir])
        html, md = os.path.join(work, "report.html"), os.path.join(work, "report.md")
        report_walls = []
        for _ in range(max(1, args.repeat)):
            w, _ = timed([binary, "report", "--history", db, "--since", "14d", "--html", html,
                          "--markdown", md])
            report_walls.append(w)
        t_report = statistics.median(report_walls)
        page = open(html, encoding="utf-8").read()
        listed = regressions_listed(page)

        fig = {
            "runs": args.runs,
            "verdict_counts": exp["counts"],
            "regressions_expected": len(exp["regressions"]),
            "regressions_listed": listed,
            "verdict_json_bytes_total": bytes_in,
            "generate_s": round(t_gen, 3),
            "schema_validated": validated,
            "validate_s": round(t_val, 3),
            "write_files_s": round(t_write, 3),
            "import_s": round(t_import, 3),
            "report_s_median": round(t_report, 3),
            "report_s_all": [round(x, 3) for x in report_walls],
            "import_plus_report_s": round(t_import + t_report, 3),
            "history_bytes": os.path.getsize(db),
            "html_bytes": os.path.getsize(html),
            "markdown_bytes": os.path.getsize(md),
            "goal_s": 15.0 if args.runs >= 100000 else 5.0,
        }
        if args.pg_runs > 0:
            fig["postgres"] = bench_postgres(binary, work, vdir, min(args.pg_runs, args.runs))
        print(f"history bench: {args.runs} runs ({bytes_in / 1e6:.1f} MB of verdict JSON; "
              f"{exp['counts']}; {len(exp['regressions'])} regressions)")
        valid = validated if validated is not None else "skipped (no jsonschema)"
        print(f"  schema check      {valid} verdicts valid ({t_val:.2f} s)")
        print(f"  history import    {t_import:8.3f} s   -> {fig['history_bytes'] / 1e6:.1f} MB "
              f"SQLite")
        print(f"  report (median)   {t_report:8.3f} s   of {fig['report_s_all']} -> HTML "
              f"{fig['html_bytes'] / 1e3:.0f} kB, Markdown {fig['markdown_bytes'] / 1e3:.1f} kB")
        goal = fig["goal_s"]
        print(f"  import + report   {t_import + t_report:8.3f} s   (goal < {goal:g} s for "
              f"{args.runs} runs: {'met' if t_import + t_report < goal else 'NOT met'})")
        pg = fig.get("postgres")
        if pg and pg.get("skipped"):
            print(f"  postgres          skipped: {pg['skipped']}")
        elif pg:
            print(f"  postgres import   {pg['import_s']:8.3f} s   {pg['runs']} runs (goal < 10 s: "
                  f"{'met' if pg['import_s'] < 10 else 'NOT met'}); {pg['rows_per_s']:.0f} runs/s")
            print(f"  postgres list     {pg['list_s']:8.3f} s   (history list --limit 20)")
            if pg.get("report_s") is not None:
                print(f"  postgres report   {pg['report_s']:8.3f} s   (report --since 14d over the URL; "
                      f"{pg['regressions_listed']} regression runs listed)")
            else:
                print(f"  postgres report   not timed: {pg.get('report_note', '')}")
        print(f"  regressions listed {listed} of {len(exp['regressions'])}")
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(fig, f, indent=2)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for p in (db, html, md):
                shutil.copy(p, args.keep)
        return 0 if listed == len(exp["regressions"]) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_postgres(binary, work, vdir, n):
    """Imports the first n verdict files into a throw-away PostgreSQL server; returns figures."""
    script = os.path.join(ROOT, "scripts", "postgres-local.sh")
    p = subprocess.run(["bash", script, "start"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=180)
    if p.returncode == 77:
        return {"skipped": "no postgres binaries (scripts/postgres-local.sh exit 77)"}
    if p.returncode != 0:
        raise RuntimeError(f"postgres-local.sh start exited {p.returncode}: {p.stderr[-2000:]}")
    env = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    url, sdir = env["NCCLSMOKE_PG_URL"].strip("'"), env["NCCLSMOKE_PG_DIR"].strip("'")
    try:
        pdir = os.path.join(work, "pg-verdicts")
        os.makedirs(pdir)
        for name in sorted(os.listdir(vdir))[:n]:
            os.link(os.path.join(vdir, name), os.path.join(pdir, name))
        t_import, _ = timed([binary, "history", "import", "--history", url, pdir, "--quiet"])
        t_list, _ = timed([binary, "history", "list", "--history", url, "--limit", "20"])
        fig = {"runs": n, "import_s": round(t_import, 3), "list_s": round(t_list, 3),
               "rows_per_s": n / t_import if t_import > 0 else 0.0, "goal_s": 10.0}
        html, md = os.path.join(work, "pg-report.html"), os.path.join(work, "pg-report.md")
        try:
            t_report, _ = timed([binary, "report", "--history", url, "--since", "14d", "--html",
                                 html, "--markdown", md])
            fig["report_s"] = round(t_report, 3)
            fig["regressions_listed"] = regressions_listed(open(html, encoding="utf-8").read())
        except RuntimeError as e:
            fig["report_s"] = None
            fig["report_note"] = str(e).replace(url, "<url>")[:300]
        return fig
    finally:
        subprocess.run(["bash", script, "stop", sdir], timeout=120, check=False)


def regressions_listed(page):
    """Regression runs the HTML report lists: each bandwidth incident names how many runs it
    covers (failure incidents are counted apart)."""
    return sum(int(n) for n in re.findall(
        r'<li class="incident" data-kind="bandwidth"[^>]*data-runs="(\d+)"', page))


def _has_quiet(binary):
    p = subprocess.run([binary, "history", "import", "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    return "--quiet" in p.stdout


if __name__ == "__main__":
    sys.exit(main())
