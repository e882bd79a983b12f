#!/usr/bin/env bash
# A throw-away PostgreSQL server for the history tests and benchmarks (never a system service).
#
#   eval "$(scripts/postgres-local.sh start [STATE_FILE])"   # sets NCCLSMOKE_PG_URL, NCCLSMOKE_PG_DIR
#   scripts/postgres-local.sh pause  DIR    # stop the server, keep its data (a "server restart")
#   scripts/postgres-local.sh resume DIR    # start it again on the same port
#   scripts/postgres-local.sh stop   DIR|STATE_FILE   # stop it and remove DIR (and STATE_FILE)
#
# start: initdb into a fresh temp dir (as the `postgres` user when run as root: root cannot run
# postgres), a random password for user `ncclsmoke` (scram-sha-256 over TCP), database
# `ncclsmoke`, listening on 127.0.0.1 only, on a free port, with its unix socket inside the temp
# dir. It prints the two variables (shell syntax) and, with STATE_FILE, writes them there too.
# stop: signals the postmaster by the PID in DIR/data/postmaster.pid (fast shutdown, SIGKILL after
# 20 s), then removes DIR. Exit 77 when the postgres binaries are absent (tests report a skip),
# unless NCCLSMOKE_REQUIRE_POSTGRES=1 (CI), where that is an error (exit 1).
set -euo pipefail

die() { echo "postgres-local: $*" >&2; exit 1; }

find_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
  done
  d=$(command -v initdb 2>/dev/null) || return 1
  d=$(dirname "$(readlink -f "$d")")
  [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
  return 1
}


# Runs a command as the server's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

server_start() {  # DIR PORT
  local dir=$1 port=$2
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c unix_socket_permissions=0700" start >/dev/null
}

postmaster_pid() {  # DIR -> pid or ""
  if [[ -f "$1/data/postmaster.pid" ]]; then head -n1 "$1/data/postmaster.pid"; fi
}

server_stop() {  # DIR: fast shutdown by PID, bounded
  local dir=$1 pid i
  pid=$(postmaster_pid "$dir")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -INT "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "postgres-local: postmaster $pid did not stop in 20 s; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  # Its backends die with it (they watch the postmaster); give them a moment.
  sleep 0.5
}

stop_all() {  # DIR|STATE_FILE: stop the server, remove its dir (and the state file)
  local target=$1 state=""
  [[ -n "$target" && ! -e "$target" ]] && return 0  # nothing started (skipped) or already gone
  if [[ -f "$target" ]]; then  # a state file: read the dir from it
    state=$target
    target=$(sed -n "s/^NCCLSMOKE_PG_DIR='\(.*\)'$/\1/p" "$state")
  fi
  [[ -n "$target" ]] || die "stop: want the server dir or the state file"
  case "$target" in /tmp/ncclsmoke-pg.*) ;; *) die "stop: '$target' is not a postgres-local dir";; esac
  server_stop "$target"
  rm -rf "$target"
  if [[ -n "$state" ]]; then rm -f "$state"; fi
}

cmd=${1:-}
# stop needs no binaries (it signals by PID): a skipped start is cleaned up as well.
if [[ "$cmd" == start || "$cmd" == pause || "$cmd" == resume ]]; then
  bindir=$(find_bindir) || {
    if [[ "${NCCLSMOKE_REQUIRE_POSTGRES:-0}" == 1 ]]; then
      die "no PostgreSQL server binaries (initdb, pg_ctl, postgres); install postgresql (scripts/install-deps.sh)"
    fi
    echo "postgres-local: no PostgreSQL server binaries (initdb); skipping" >&2
    exit 77
  }
fi
case "$cmd" in
  start)
    state=${2:-}
    # A server a previous run left behind (its cleanup never ran): stop it first.
    if [[ -n "$state" && -f "$state" ]]; then stop_all "$state" || true; fi
    dir=$(mktemp -d /tmp/ncclsmoke-pg.XXXXXX)
    ok=0
    trap 'if [[ $ok != 1 ]]; then server_stop "$dir"; rm -rf "$dir"; fi' EXIT  # no half server left
    chmod 700 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
    password=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(12))')
    printf '%s\n' "$password" >"$dir/pw"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir/pw"
    as_owner "$bindir/initdb" -D "$dir/data" -U ncclsmoke --pwfile="$dir/pw" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    rm -f "$dir/pw"
    started=0
    for ((try = 0; try < 5; try++)); do  # a port taken between the probe and the bind: retry
      port=$(free_port)
      if server_start "$dir" "$port"; then started=1; break; fi
    done
    ((started)) || { tail -n 20 "$dir/server.log" >&2; die "the server did not start (see above)"; }
    as_owner "$bindir/psql" -h "$dir" -p "$port" -U ncclsmoke -d postgres -qAt \
      -c "CREATE DATABASE ncclsmoke" >/dev/null || die "CREATE DATABASE failed"
    echo "$port" >"$dir/port"
    url="postgresql://ncclsmoke:${password}@127.0.0.1:${port}/ncclsmoke"
    out=$(printf "NCCLSMOKE_PG_URL='%s'\nNCCLSMOKE_PG_DIR='%s'\n" "$url" "$dir")
    if [[ -n "$state" ]]; then
      printf '%s\n' "$out" >"$state.tmp" && mv "$state.tmp" "$state"
    fi
    printf '%s\n' "$out"
    ok=1
    ;;
  pause)
    [[ -d "${2:-}" ]] || die "pause: no such server dir '${2:-}'"
    server_stop "$2"
    ;;
  resume)
    [[ -f "${2:-}/port" ]] || die "resume: no server dir '${2:-}'"
    server_start "$2" "$(cat "$2/port")"
    ;;
  stop)
    stop_all "${2:-}"
    ;;
  *)
    echo "usage: $0 start [STATE_FILE] | pause DIR | resume DIR | stop DIR|STATE_FILE" >&2
    exit 2
    ;;
esac
