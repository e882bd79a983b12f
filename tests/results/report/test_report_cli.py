#!/usr/bin/python3
"""`ncclsmoke report` end to end, without a browser: a history imported from generated verdicts
(made from a real launch), the HTML and Markdown it writes, Markdown on stdout (also as
`--markdown -`, and the page as `--html -`: never a file named "-"), the run list's links
(--verdict-url, else the imported files), the empty window, and the errors (missing history, bad
--since, unwritable output, --verdict-url without {run_id}, both outputs on stdout: one line,
exit 2; a corrupt history: one line with the move-aside hint, exit 7).

    /usr/bin/python3 tests/results/report/test_report_cli.py --binary build/ncclsmoke
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_fixture import build_history, check, failures, run  # noqa: E402

def usage_error(p, must_name, what):
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 2, f"{what}: exit 2 (got {p.returncode})")
    check(len(lines) == 1 and must_name in lines[0],
          f"{what}: one stderr line naming {must_name!r} (got {p.stderr!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    args = ap.parse_args()
    b = os.path.abspath(args.binary)
    work = tempfile.mkdtemp(prefix="ncclsmoke-report-cli-")
    try:
        db, exp = build_history(b, work, n=80)
        html, md = os.path.join(work, "report.html"), os.path.join(work, "report.md")
        p = run([b, "report", "--history", db, "--since", "14d", "--html", html,
                 "--markdown", md, "--title", "CI <loopback> report"])
        check(p.returncode == 0, f"report exits 0 (got {p.returncode}: {p.stderr.strip()})")
        page = open(html, encoding="utf-8").read()
        text = open(md, encoding="utf-8").read()
        nreg = len(exp["regressions"])
        check(nreg > 0, f"the scenario has regressions ({nreg})")
        incidents = re.findall(r'<li class="incident" data-kind="bandwidth"[^>]*data-runs="(\d+)" '
                               r'data-first-run="([^"]*)" data-last-run="([^"]*)"', page)
        check(len(incidents) == len(exp["incidents"]),
              f"one bandwidth incident per step change ({len(incidents)} of "
              f"{len(exp['incidents'])})")
        check(sum(int(n) for n, _, _ in incidents) == nreg,
              f"the incidents hold every regression run ({nreg})")
        check(incidents and incidents[0][2] == exp["regressions"][-1],
              "the newest incident comes first and ends with the newest regression")
        check(page.find('class="incidents"') < page.find('class="busbw-chart"'),
              "regressions come before the charts")
        check('<svg class="size-chart"' in page, "a busbw-versus-size chart")
        check(re.search(r'<svg class="busbw-chart"[^>]*data-transport="socket"', page) is not None,
              "a socket busbw chart")
        check("&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page,
              "the hostile finding message is escaped")
        check("CI &lt;loopback&gt; report" in page, "the title is escaped")
        # Grouped by code and subject, never by text: the regressions' differing messages are one
        # row that counts their runs.
        br = re.findall(r'<tr class="finding[^"]*" data-code="BANDWIDTH_REGRESSION" data-runs="(\d+)"',
                        page)
        nbr = nreg - 1  # every regression run but the one SILENT_FALLBACK (run 50) has one
        check(len(br) == 1, f"one BANDWIDTH_REGRESSION row, whatever its numbers ({len(br)})")
        check(br and int(br[0]) == nbr, f"... counting its {nbr} runs ({br})")
        check(page.count('<td class="hint">') == page.count('<tr class="finding'),
              "every findings row has a hint cell")
        links = re.findall(r'<tr class="run" data-run="([^"]*)"[^>]*>.*?href="([^"]*)"', page)
        check(len(links) == exp["n"] and all(h.startswith("file:///") and h.endswith(
            f"/{rid}.json") for rid, h in links),
              f"each run links to the verdict file it was imported from ({links[:1]})")
        c = exp["counts"]
        check(f"Runs: {exp['n']}" in text, "Markdown: run count")
        check(f"pass {c['pass']} \u00b7 degraded {c['degraded']} \u00b7 fail {c['fail']}" in text,
              f"Markdown: counts by verdict {c}")
        check(f"Incidents ({len(exp['incidents']) + 1}, " in text,
              "Markdown: the incidents (bandwidth, and the TRANSPORT_INIT_FAILED failure)")
        check("### Cluster default" in text, "Markdown: a section per cluster")
        check("socket on ci-loopback:" in text and "of baseline 0.74" in text,
              "Markdown: latest per (profile, transport) with its ratio")

        p = run([b, "report", "--history", db])
        check(p.returncode == 0 and p.stdout.startswith("**ncclsmoke regression report**"),
              "no --html/--markdown: Markdown on stdout")
        # "-" is stdout, never a file named "-"; the one summary line goes to stderr then.
        p = run([b, "report", "--history", db, "--markdown", "-"], cwd=work)
        check(p.returncode == 0 and p.stdout.startswith("**ncclsmoke regression report**") and
              "report: " in p.stderr and not os.path.exists(os.path.join(work, "-")),
              f"--markdown -: Markdown on stdout, no file '-' ({p.returncode}, {p.stderr!r})")
        p = run([b, "report", "--history", db, "--html", "-", "--markdown", md,
                 "--verdict-url", "https://ci.example/v/{run_id}.json"], cwd=work)
        check(p.returncode == 0 and p.stdout.startswith("<!DOCTYPE html>") and
              p.stdout.rstrip().endswith("</html>") and not os.path.exists(os.path.join(work, "-")),
              "--html -: the page on stdout, no file '-'")
        check(f'href="https://ci.example/v/{exp["regressions"][-1]}.json"' in p.stdout,
              "--verdict-url: the runs link to the template's URL")
        usage_error(run([b, "report", "--history", db, "--html", "-", "--markdown", "-"]),
                    "stdout", "--html - and --markdown -")
        usage_error(run([b, "report", "--history", db, "--verdict-url", "https://x/v.json"]),
                    "--verdict-url", "--verdict-url without {run_id}")

        empty = os.path.join(work, "empty.html")
        p = run([b, "report", "--history", db, "--since", "2099-01-01T00:00:00Z", "--html", empty])
        check(p.returncode == 0, f"empty window exits 0 (got {p.returncode}: {p.stderr.strip()})")
        check(os.path.exists(empty) and "No runs since 2099-01-01 00:00 UTC" in
              open(empty).read(), "empty window: 'No runs since ...'")
        p = run([b, "report", "--history", db, "--profile", "no-such-profile"])
        check(p.returncode == 0 and "No runs since" in p.stdout, "unknown profile: empty window")
        p = run([b, "report", "--history", db, "--profile", "ci-loopback", "--since", "30d"])
        check(p.returncode == 0 and f"Runs: {exp['n']}" in p.stdout, "--profile ci-loopback")

        missing = os.path.join(work, "nope.db")
        usage_error(run([b, "report", "--history", missing]), missing, "missing history")
        check(not os.path.exists(missing), "a missing history is not created")
        corrupt = os.path.join(work, "corrupt.db")
        with open(corrupt, "wb") as f:
            f.write(b"this is not a database" * 200)
        p = run([b, "report", "--history", corrupt])
        check(p.returncode == 7, f"corrupt history: exit 7, history unusable (got {p.returncode})")
        check(len([l for l in p.stderr.splitlines() if l.strip()]) == 1
              and corrupt + ".corrupt" in p.stderr,
              f"corrupt history: one line with the move-aside hint (got {p.stderr!r})")
        usage_error(run([b, "report", "--history", db, "--since", "yesterday-ish"]), "--since",
                    "bad --since")
        usage_error(run([b, "report", "--history", db, "--html",
                         os.path.join(work, "no", "such", "dir", "r.html")]), "--html",
                    "unwritable --html")
        p = run([b, "report", "--since", "14d"])
        check(p.returncode == 2 and "--history" in p.stderr, "--history is required")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
