#!/usr/bin/env bash
# The alert rules: promtool's syntax/lint check, its unit tests (cases that fire and that must
# not; the summaries' hosts are asserted there), yamllint (strict: warnings fail too), and our
# rules: one runbook base URL (the recording rule ncclsmoke:runbook_base_url:info, its `url` label an
# absolute http(s) URL, ahead of the alerts in their group), every alert's runbook_url that base
# (read by the one template prefix) + a file that exists in the repository with the anchor (a
# GitHub-style heading anchor), every summary but the staleness ones names the host
# (ncclsmoke_suspect_host or $labels.host; the node alerts' $labels.node or $labels.Hostname), and no annotation sends people to "the rank-0 pod's
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
BASE_RULE = "ncclsmoke:runbook_base_url:info"
# What every runbook_url starts with: the base URL (trailing slashes dropped) and '/', or nothing
# when the base series is missing (then the repository-relative path is left).
BASE_PREFIX = ('{{ with query "%s" }}{{ . | first | label "url" | reReplaceAll "/+$" "" }}/{{ end }}'
               % BASE_RULE)
errors, n = [], 0
groups = yaml.safe_load(open(rules_file))["groups"]
bases = [(g["name"], i, r) for g in groups for i, r in enumerate(g["rules"]) if r.get("record") == BASE_RULE]
if len(bases) != 1:
    errors.append(f"{len(bases)} {BASE_RULE} recording rules: the runbook base URL must be set exactly once")
else:
    base_group, base_index, base = bases[0]
    base_url = (base.get("labels") or {}).get("url", "")
    if base.get("expr", "").strip() != "vector(1)" or not re.fullmatch(r"https?://[^\s{}$\"]+", base_url):
        errors.append(f"{BASE_RULE}: expr {base.get('expr')!r} / url {base_url!r}: "
                      "want vector(1) and an absolute http(s) URL")
    for g in groups:
        for i, r in enumerate(g["rules"]):
            if "alert" in r and (g["name"] != base_group or i < base_index):
                errors.append(f"{r['alert']}: not after {BASE_RULE} in group {base_group!r} "
                              "(its runbook_url would miss the base on the first evaluation)")
for group in groups:
    for rule in group["rules"]:
        if "alert" not in rule:
            continue
        n += 1
        name, ann = rule["alert"], rule.get("annotations", {})
        url = " ".join(ann.get("runbook_url", "").split())  # folded YAML: one space per break
        if not url.startswith(BASE_PREFIX):
            errors.append(f"{name}: runbook_url {url!r} is not built from the one base URL: "
                          f"it must start with {BASE_PREFIX!r}")
            continue
        url = url[len(BASE_PREFIX):]
        path, _, anchor = url.partition("#")
        if "://" in url or url.startswith("/") or "{{" in path:
            errors.append(f"{name}: runbook_url's path {url!r} must be repository-relative, after the base")
        elif not url or not anchor:
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
        # The node's own alerts name it by the exporters' labels (kube-state-metrics' node,
        # dcgm-exporter's Hostname).
        if name != "NcclSmokeStale" and not any(h in summary for h in (
                "ncclsmoke_suspect_host", "$labels.host", "$labels.node", "$labels.Hostname")):
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
