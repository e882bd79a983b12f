#!/usr/bin/env bash
# The alert rules: promtool's syntax/lint check, its unit tests (cases that fire and that must
# not; the summaries' hosts are asserted there), yamllint (strict: warnings fail too), and our
# rules: every alert has a runbook_url whose file exists in the repository with the anchor (a
# GitHub-style heading anchor), every summary but the staleness ones names the host
# (ncclsmoke_suspect_host or $labels.host), and no annotation sends people to "the rank-0 pod's
# log" without a host. Usage: check_alert_rules.sh cronjob/alerts   (exit 77: promtool absent)
set -eu
cd "$1"
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (Debian package 'prometheus')"
  exit 77
fi
promtool check rules ncclsmoke-alerts.yaml
promtool test rules ncclsmoke-alerts.test.yaml
/usr/bin/python3 - ncclsmoke-alerts.yaml ../.. <<'PY'
import os, re, sys, yaml
rules_file, root = sys.argv[1], sys.argv[2]
def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:  # GitHub: lower case, drop punctuation but '-' and '_', spaces to '-'
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
        out.update(re.findall(r'<a (?:id|name)="([^"]+)"', line))
    return out
errors, n = [], 0
for group in yaml.safe_load(open(rules_file))["groups"]:
    for rule in group["rules"]:
        if "alert" not in rule:
            continue
        n += 1
        name, ann = rule["alert"], rule.get("annotations", {})
        url = ann.get("runbook_url", "")
        path, _, anchor = url.partition("#")
        if not url or not anchor:
            errors.append(f"{name}: runbook_url {url!r} lacks a file#anchor")
        elif not os.path.isfile(os.path.join(root, path)):
            errors.append(f"{name}: runbook_url {url!r}: {path} is not in the repository")
        elif "{{" in anchor:  # templated on the finding code: every code needs its heading
            codes = re.findall(r"^### ([A-Z][A-Z0-9_]+)$", open(os.path.join(root, path)).read(), re.M)
            have = anchors(os.path.join(root, path))
            if not codes or "$labels.code" not in anchor:
                errors.append(f"{name}: runbook_url {url!r}: a template anchor must be the finding code")
            errors += [f"{name}: {path} has no anchor #{c.lower()}" for c in codes if c.lower() not in have]
        elif anchor not in anchors(os.path.join(root, path)):
            errors.append(f"{name}: runbook_url {url!r}: {path} has no heading with anchor #{anchor}")
        summary = ann.get("summary", "")
        if name != "NcclSmokeStale" and "ncclsmoke_suspect_host" not in summary and "$labels.host" not in summary:
            errors.append(f"{name}: the summary does not name the host: {summary!r}")
        for key, text in ann.items():
            if re.search(r"rank-0 pod", text) and "host" not in text:
                errors.append(f"{name}: {key} sends people to the rank-0 pod's log without naming the host")
for e in errors:
    print("FAIL: " + e)
print(f"alert annotations: {n} alerts checked, {len(errors)} problem(s)")
sys.exit(1 if errors or n < 7 else 0)
PY
if command -v yamllint >/dev/null; then
  # cronjob/.yamllint (shared by everything under cronjob/) when present, else its gist.
  if [ -f ../.yamllint ]; then config=(-c ../.yamllint)
  else config=(-d "{extends: default, rules: {line-length: {max: 120}}}"); fi
  yamllint -s "${config[@]}" ncclsmoke-alerts.yaml ncclsmoke-alerts.test.yaml
  echo "yamllint: ok"
else
  echo "yamllint not found: skipped the YAML lint (Debian package 'yamllint')"
fi
