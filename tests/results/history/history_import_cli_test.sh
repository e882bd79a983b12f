#!/usr/bin/env bash
# `ncclsmoke history import` end to end (harness/cli/history_command.cpp): every file is checked, a bad
# one is named with its reason and nothing is stored (exit 2), whichever path read it (the
# one-pass reader for ordinary verdicts, nlohmann + the schema validator for the rest); valid but
# unusual files (escaped keys) are stored too; local verdicts are counted in one line; a first
# import of many files (the bulk load, worker threads) leaves a WAL-mode file and no journal behind;
# a run tree as launch leaves it is walked, each run stored with its file; `history list` shows the
# cluster.
#   history_import_cli_test.sh NCCLSMOKE_BINARY
set -euo pipefail
bin=$1
py=/usr/bin/python3
work=$(mktemp -d /tmp/ncclsmoke-import-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# verdict RUN_ID [python statements on `d`] -> a verdict document on stdout
verdict() {
  "$py" - "$1" "${2:-}" <<'PY'
import json, sys
d = {"schema_version": 1, "tool": {"name": "ncclsmoke", "version": "0.1.0"},
     "run_id": sys.argv[1], "started_at": "2026-11-30T10:00:00.000Z", "duration_s": 3.5,
     "scope": "global", "reporting_rank": 0, "verdict": "pass", "exit_code": 0,
     "world": {"size": 2, "master_addr": "127.0.0.1", "master_port": 29500, "source": "flags"},
     "ranks": [{"rank": 0, "status": "joined", "host": "h0"}, {"rank": 1, "status": "joined", "host": "h1"}],
     "phases": [{"name": "world", "status": "pass", "duration_s": 0.01}],
     "transports": [{"transport": "socket", "bytes": 1048576, "count": 262144, "dtype": "float32",
                     "in_place": False, "time_us": 800.0, "algbw_gbps": 1.3, "busbw_gbps": 1.3,
                     "wrong": 0, "gate": True}],
     "findings": [{"code": "STRAGGLER", "severity": "warning", "layer": "transport", "ranks": [1],
                   "hosts": ["h1"], "message": "rank 1 slow", "hint": "look"}],
     "env": {}, "versions": {"ncclsmoke": "0.1.0"}}
exec(sys.argv[2])
print(json.dumps(d))
PY
}

mkdir "$work/mixed"
verdict r-good-1 > "$work/mixed/a.json"
verdict r-bad-schema 'd["findings"][0]["severity"] = "fatal"' > "$work/mixed/b.json"
echo '{"schema_version": 1, ' > "$work/mixed/c.json"
verdict r-good-2 > "$work/mixed/d.json"
db=$work/h.db
set +e
out=$("$bin" history import --history "$db" "$work/mixed" 2>&1); rc=$?
set -e
[[ $rc -eq 2 ]] || fail "mixed import exited $rc, want 2: $out"
grep -q "b.json: not a verdict: /findings/0/severity: \"fatal\" is not one of" <<<"$out" || fail "b.json not named with its reason: $out"
grep -q "c.json: not JSON" <<<"$out" || fail "c.json not named: $out"
grep -q "nothing stored (2 bad inputs of 4)" <<<"$out" || fail "no summary: $out"
[[ ! -e $db && ! -e $db-journal && ! -e $db-wal ]] || fail "a rejected first import left a file behind"

mkdir "$work/good"
verdict r-good-1 > "$work/good/a.json"
verdict r-good-2 'd["verdict"] = "fail"; d["exit_code"] = 1' > "$work/good/b.json"
# Valid but unusual: an escaped key and a non-ASCII host (the full path reads these).
verdict r-good-3 | sed 's/"run_id"/"run\\u005fid"/' > "$work/good/c.json"
verdict r-good-4 'd["ranks"][0]["host"] = "h\u00e9te"' > "$work/good/d.json"
verdict r-local 'd["scope"] = "local"; d["reporting_rank"] = 1' > "$work/good/e.json"
out=$("$bin" history import --history "$db" "$work/good" 2>&1) || fail "good import failed: $out"
grep -q "4 runs added, 0 already stored, 1 local skipped (one rank's view each; the run's global verdict.json is what is stored), 1 run with only local verdicts (rank 0 wrote no verdict.json, e.g. $work/good/e.json); 4 in total" <<<"$out" || fail "good import: $out"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "good import printed more than one line: $out"
ids=$("$bin" history list --history "$db" --json | "$py" -c 'import json,sys; print(" ".join(sorted(r["run_id"] for r in json.load(sys.stdin))))')
[[ $ids == "r-good-1 r-good-2 r-good-3 r-good-4" ]] || fail "stored runs: $ids"
out=$("$bin" history import --history "$db" "$work/good" 2>&1) || fail "re-import failed: $out"
grep -q "0 runs added, 4 already stored" <<<"$out" || fail "re-import: $out"

# Into an existing history: a bad file (exit code that contradicts the verdict) stores nothing.
verdict r-new > "$work/new.json"
verdict r-contradict 'd["exit_code"] = 1' > "$work/contradict.json"
set +e
out=$("$bin" history import --history "$db" "$work/new.json" "$work/contradict.json" 2>&1); rc=$?
set -e
[[ $rc -eq 2 ]] || fail "contradicting import exited $rc: $out"
grep -q "contradict.json: not a verdict: /exit_code: exit code 1 does not match verdict \"pass\"" <<<"$out" || fail "contradict.json reason: $out"
n=$("$bin" history list --history "$db" --limit 0 --json | "$py" -c 'import json,sys; print(len(json.load(sys.stdin)))')
[[ $n == 4 ]] || fail "after a rejected import the history holds $n runs, want 4"

# Many files (worker threads; the first import is the bulk load): one bad one in the middle.
mkdir "$work/many"
for i in $(seq -w 1 80); do verdict "r-many-$i" > "$work/many/v$i.json"; done
verdict r-many-bad 'd["ranks"][0]["rank"] = -1' > "$work/many/v40x.json"
db2=$work/many.db
set +e
out=$("$bin" history import --history "$db2" "$work/many" 2>&1); rc=$?
set -e
[[ $rc -eq 2 ]] || fail "many with a bad one exited $rc"
grep -q "v40x.json: not a verdict: /ranks/0/rank: -1 is below the minimum 0" <<<"$out" || fail "v40x.json reason: $out"
[[ ! -e $db2 ]] || fail "a rejected bulk import left $db2"
rm "$work/many/v40x.json"
out=$("$bin" history import --history "$db2" "$work/many" 2>&1) || fail "bulk import failed: $out"
grep -q "80 runs added, 0 already stored; 80 in total" <<<"$out" || fail "bulk import: $out"
[[ ! -e $db2-journal ]] || fail "the bulk load left a rollback journal"
if command -v sqlite3 >/dev/null; then
  mode=$(sqlite3 "$db2" 'PRAGMA journal_mode')
  [[ $mode == wal ]] || fail "after the bulk load the history is in journal mode '$mode', want wal"
fi
# A run tree as `launch` leaves it (ncclsmoke-runs/<run id>/verdict.json + verdict.rank<N>.json),
# one level deeper than the directory named: walked; the global verdicts stored with their path,
# the local ones counted in the one line (no line per rank); a run whose rank 0 wrote no
# verdict.json is counted apart. `history list` shows the cluster.
tree=$work/tree/ncclsmoke-runs
for run in launch-aaa launch-bbb launch-ccc; do
  mkdir -p "$tree/$run"
  verdict "r-$run" > "$tree/$run/verdict.json"
  for rank in 0 1 2; do
    verdict "r-$run" "d['scope'] = 'local'; d['reporting_rank'] = $rank" > "$tree/$run/verdict.rank$rank.json"
  done
  echo "rank log" > "$tree/$run/rank0.log"
done
rm "$tree/launch-ccc/verdict.json"  # rank 0 never wrote the global verdict
db3=$work/tree.db
out=$(NCCLSMOKE_CLUSTER=eks-a "$bin" history import --history "$db3" "$work/tree" 2>"$work/tree.err") || fail "tree import failed: $out $(cat "$work/tree.err")"
[[ ! -s $work/tree.err ]] || fail "tree import wrote to stderr: $(cat "$work/tree.err")"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "tree import printed more than one line: $out"
grep -q "2 runs added, 0 already stored, 9 local skipped" <<<"$out" || fail "tree import counts: $out"
grep -q "1 run with only local verdicts (rank 0 wrote no verdict.json, e.g. $tree/launch-ccc/verdict.rank0.json)" <<<"$out" || fail "tree import: local-only run not counted: $out"
src=$("$bin" history list --history "$db3" --json | "$py" -c 'import json,sys; print(" ".join(sorted(r["source"] for r in json.load(sys.stdin))))')
[[ $src == "import:$tree/launch-aaa/verdict.json import:$tree/launch-bbb/verdict.json" ]] || fail "sources: $src"
list=$("$bin" history list --history "$db3")
grep -qE '^started +run +verdict +cluster ' <<<"$list" || fail "history list has no header with a cluster column: $list"
[[ $(grep -c ' pass  *eks-a  *n=2 ' <<<"$list") -eq 2 ]] || fail "history list does not show the cluster: $list"
# Relative paths are stored absolute (the report's file:// link works from anywhere).
(cd "$work/tree" && "$bin" history import --history "$work/rel.db" ncclsmoke-runs/launch-aaa/verdict.json >/dev/null) || fail "relative import"
src=$("$bin" history list --history "$work/rel.db" --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)[0]["source"])')
[[ $src == "import:$tree/launch-aaa/verdict.json" ]] || fail "relative source: $src"
# A run with the same code many times lists it once with its count (a fleet's 164 GPU_XID
# findings were a 2 KB line), in the order stored.
verdict r-repeats 'd["verdict"] = "degraded"; d["exit_code"] = 3; d["findings"] = [dict(d["findings"][0], ranks=[r], message="rank %d slow" % r) for r in (1, 1, 1)] + [dict(d["findings"][0], code="SLOW_LINK")]' > "$work/repeats.json"
"$bin" history import --history "$work/rep.db" "$work/repeats.json" >/dev/null || fail "import of repeats"
list=$("$bin" history list --history "$work/rep.db")
grep -qE ' STRAGGLER x3,SLOW_LINK$' <<<"$list" || fail "repeated codes not counted: $list"
mkdir -p "$work/empty/a/b"
set +e
out=$("$bin" history import --history "$work/e.db" "$work/empty" 2>&1); rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "holds no \*.json files (3 directories searched)" <<<"$out" || fail "empty tree: $rc $out"

echo "history import CLI: all checks passed"
