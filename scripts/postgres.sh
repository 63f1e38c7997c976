#!/usr/bin/env bash
# postgres.sh runs a throwaway PostgreSQL cluster for the postgres backend's
# tests. It never touches a system cluster: it makes its own with initdb in
# the repository's git-ignored .tmp/postgres/ (data, socket, log) and starts
# it on a free loopback port.
#
# Usage:
#   scripts/postgres.sh install   install PostgreSQL with apt-get if its binaries are missing
#   scripts/postgres.sh start     create the cluster if needed, start it unless it is
#                                 already running, wait until it answers, print the
#                                 environment the tests read as export lines
#   scripts/postgres.sh env       print those export lines
#   scripts/postgres.sh status    say whether it is running
#   scripts/postgres.sh stop      stop the cluster this script started
#   scripts/postgres.sh destroy   stop it and delete its data
#
# A developer runs:
#   eval "$(scripts/postgres.sh start)"
#   (cd postgres && go test ./...)
#
# initdb refuses to run as root, so when this script runs as root the cluster
# belongs to the "postgres" system user (which the Debian package creates) and
# every server command runs as that user with runuser.
#
# Settings (environment): POSTGRES_PORT (default: the first free port from
# 54329 down to 54320), PG_BINDIR (default: the newest
# /usr/lib/postgresql/*/bin, else the directory of initdb on PATH).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.tmp/postgres
DATA=$STATE/data
SOCK=$STATE/sock
LOG=$STATE/log
PORTFILE=$STATE/port
# The superuser's password: the server listens on loopback only and holds
# nothing but test data. Password (SCRAM) authentication, rather than trust,
# lets the tests check how a wrong password is reported.
PASSWORD=leaderelection-test
DATABASE=leaderelection

say() { echo "postgres.sh: $*" >&2; }

bindir() {
	if [ -n "${PG_BINDIR:-}" ]; then
		echo "$PG_BINDIR"
		return 0
	fi
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$d" ] && [ -x "$d/initdb" ]; then
		echo "$d"
		return 0
	fi
	if command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

install() {
	if bindir >/dev/null; then
		return 0
	fi
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing PostgreSQL with apt-get"
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
		bindir >/dev/null && return 0
	fi
	say "no PostgreSQL server binaries (initdb, pg_ctl) found: install PostgreSQL (Debian: apt-get install postgresql) or set PG_BINDIR"
	return 1
}

# as_owner runs a command as the cluster's owner: the postgres user when this
# script runs as root, else the caller.
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

port() {
	if [ -n "${POSTGRES_PORT:-}" ]; then
		echo "$POSTGRES_PORT"
	elif [ -s "$PORTFILE" ]; then
		cat "$PORTFILE" # where this script last started it
	else
		echo 54329
	fi
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

dsn() {
	echo "postgres://postgres:$PASSWORD@127.0.0.1:$1/$DATABASE?sslmode=disable"
}

print_env() {
	echo "export LEADERELECTION_POSTGRES_DSN=$(dsn "$(port)")"
}

running() {
	local bin
	bin=$(bindir) || return 1
	[ -f "$DATA/postmaster.pid" ] || return 1
	as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

answers() {
	pg_isready -q -h 127.0.0.1 -p "$1" -d "$DATABASE" -U postgres >/dev/null 2>&1 ||
		"$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$1" -d "$DATABASE" -U postgres >/dev/null 2>&1
}

create_cluster() {
	local bin=$1
	[ -f "$DATA/PG_VERSION" ] && return 0
	say "creating a cluster in $DATA"
	rm -rf "$DATA"
	mkdir -p "$DATA" "$SOCK"
	local pwfile=$STATE/pwfile
	echo "$PASSWORD" >"$pwfile"
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres: "$STATE"
	fi
	chmod 700 "$DATA"
	as_owner "$bin/initdb" -D "$DATA" -U postgres --pwfile="$pwfile" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >&2
	rm -f "$pwfile"
}

start() {
	install
	local bin p
	bin=$(bindir)
	mkdir -p "$STATE"
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$STATE"
	fi
	create_cluster "$bin"
	if running; then
		p=$(port)
		if answers "$p"; then
			say "already running at 127.0.0.1:$p, data in $DATA"
			print_env
			return 0
		fi
		say "a server runs on $DATA but does not answer at 127.0.0.1:$p; stop it with $0 stop"
		return 1
	fi
	if [ -n "${POSTGRES_PORT:-}" ]; then
		p=$POSTGRES_PORT
		if port_taken "$p"; then
			say "127.0.0.1:$p is taken; set another POSTGRES_PORT"
			return 1
		fi
	else
		p=
		local c
		for c in 54329 54328 54327 54326 54325 54324 54323 54322 54321 54320; do
			if ! port_taken "$c"; then
				p=$c
				break
			fi
		done
		if [ -z "$p" ]; then
			say "ports 54320-54329 on 127.0.0.1 are all taken; set POSTGRES_PORT"
			return 1
		fi
	fi
	echo "$p" >"$PORTFILE"
	# fsync=off: a test cluster need not survive a power cut, and it makes
	# every commit much faster. max_connections leaves room for the tests
	# that give each of 50 writers a connection of its own.
	if ! as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 30 start \
		-o "-c listen_addresses=127.0.0.1 -p $p -k $SOCK -c fsync=off -c full_page_writes=off -c max_connections=300" >&2; then
		say "the server did not start; its log:"
		tail -n 30 "$LOG" >&2 || true
		return 1
	fi
	if ! as_owner "$bin/psql" -h "$SOCK" -p "$p" -U postgres -d postgres -tAq \
		-c "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'" | grep -q 1; then
		as_owner "$bin/psql" -h "$SOCK" -p "$p" -U postgres -d postgres -q \
			-c "CREATE DATABASE $DATABASE" >&2
	fi
	for _ in $(seq 1 100); do
		if answers "$p"; then
			say "started at 127.0.0.1:$p, data in $DATA, log in $LOG"
			print_env
			return 0
		fi
		sleep 0.1
	done
	say "the server does not answer at 127.0.0.1:$p; its log:"
	tail -n 30 "$LOG" >&2 || true
	stop || true
	return 1
}

stop() {
	if running; then
		as_owner "$(bindir)/pg_ctl" -D "$DATA" -m fast -w stop >&2
		say "stopped"
	else
		say "not running"
	fi
	rm -f "$PORTFILE"
}

status() {
	local p
	p=$(port)
	if running && answers "$p"; then
		say "running at 127.0.0.1:$p, data in $DATA"
	else
		say "not running"
		return 1
	fi
}

destroy() {
	stop
	rm -rf "$STATE"
	say "deleted $STATE"
}

case "${1:-}" in
install) install ;;
start) start ;;
env) print_env ;;
status) status ;;
stop) stop ;;
destroy) destroy ;;
*)
	echo "usage: $0 install|start|env|status|stop|destroy" >&2
	exit 2
	;;
esac
