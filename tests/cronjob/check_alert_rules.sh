#!/usr/bin/env bash
# The alert rules: promtool's syntax/lint check, its unit tests (cases that fire and that must
# not), and yamllint (strict: warnings fail too). Usage: check_alert_rules.sh cronjob/alerts   (exit 77: promtool absent)
set -eu
cd "$1"
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not found (Debian package 'prometheus')"
  exit 77
fi
promtool check rules ncclsmoke-alerts.yaml
promtool test rules ncclsmoke-alerts.test.yaml
if command -v yamllint >/dev/null; then
  # cronjob/.yamllint (shared by everything under cronjob/) when present, else its gist.
  if [ -f ../.yamllint ]; then config=(-c ../.yamllint)
  else config=(-d "{extends: default, rules: {line-length: {max: 120}}}"); fi
  yamllint -s "${config[@]}" ncclsmoke-alerts.yaml ncclsmoke-alerts.test.yaml
  echo "yamllint: ok"
else
  echo "yamllint not found: skipped the YAML lint (Debian package 'yamllint')"
fi
