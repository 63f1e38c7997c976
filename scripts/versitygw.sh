#!/usr/bin/env bash
# versitygw.sh installs and runs versitygw, a real S3 server, for the s3
# backend's tests. Everything it makes stays in the repository's git-ignored
# .bin/ (the binary) and .tmp/versitygw/ (data, log, pid file).
#
# Usage:
#   scripts/versitygw.sh install   build versitygw into .bin/ (first build: minutes)
#   scripts/versitygw.sh start     install if needed, start it unless it is already
#                                  running, wait until it answers, print the
#                                  environment the tests read as export lines
#   scripts/versitygw.sh env       print those export lines
#   scripts/versitygw.sh status    say whether it is running
#   scripts/versitygw.sh stop      stop the server this script started
#
# A developer runs:
#   eval "$(scripts/versitygw.sh start)"
#   go test ./s3/
#
# Settings (environment): VERSITYGW_ADDR (default 127.0.0.1:7070; when it is
# not set and something this script did not start holds that port, start
# tries 7071 to 7079), VERSITYGW_ACCESS_KEY / VERSITYGW_SECRET_KEY (default
# fixed test keys: the server listens on loopback only and holds nothing but
# test data).
set -euo pipefail

VERSION=v1.8.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/.bin/versitygw
STATE=$ROOT/.tmp/versitygw
PIDFILE=$STATE/pid
ADDRFILE=$STATE/addr
LOG=$STATE/log
ACCESS_KEY=${VERSITYGW_ACCESS_KEY:-leaderelection-test}
SECRET_KEY=${VERSITYGW_SECRET_KEY:-leaderelection-test-secret}

set_addr() {
	ADDR=$1
	ENDPOINT=http://$ADDR
}
if [ -n "${VERSITYGW_ADDR:-}" ]; then
	set_addr "$VERSITYGW_ADDR"
elif [ -s "$ADDRFILE" ]; then
	set_addr "$(cat "$ADDRFILE")" # where this script last started it
else
	set_addr 127.0.0.1:7070
fi

installed_version() {
	[ -x "$BIN" ] || return 0
	go version -m "$BIN" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/versity/versitygw" { print $3 }'
}

install() {
	if [ "$(installed_version)" = "$VERSION" ]; then
		return 0
	fi
	say "building versitygw $VERSION into $ROOT/.bin (the first build takes several minutes)"
	mkdir -p "$ROOT/.bin"
	# versitygw v1.8.0's go.mod asks for go 1.25.0; the local toolchain must
	# satisfy it, since no other toolchain can be downloaded here.
	if ! (cd "$ROOT" && GOBIN="$ROOT/.bin" GOTOOLCHAIN=local GOFLAGS=-mod=mod \
		go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2); then
		say "go install failed (versitygw $VERSION needs Go >= 1.25.0; this is $(go env GOVERSION))"
		return 1
	fi
}

answers() {
	# Any HTTP answer (an unauthenticated request gets 403) means it is up.
	curl -s -o /dev/null --max-time 2 "$ENDPOINT/"
}

print_env() {
	cat <<EOF
export LEADERELECTION_S3_ENDPOINT=$ENDPOINT
export LEADERELECTION_S3_ACCESS_KEY=$ACCESS_KEY
export LEADERELECTION_S3_SECRET_KEY=$SECRET_KEY
EOF
}

start() {
	install
	mkdir -p "$STATE/data"
	if pid=$(running_pid); then
		if answers; then
			say "already running (pid $pid) at $ENDPOINT"
			print_env
			return 0
		fi
	elif answers; then
		if [ -n "${VERSITYGW_ADDR:-}" ]; then
			say "something not started by this script already answers at $ENDPOINT; stop it or set another VERSITYGW_ADDR"
			return 1
		fi
		local port found=
		for port in 7070 7071 7072 7073 7074 7075 7076 7077 7078 7079; do
			set_addr 127.0.0.1:$port
			if ! answers; then
				found=1
				break
			fi
		done
		if [ -z "$found" ]; then
			say "ports 7070-7079 on 127.0.0.1 are all taken; set VERSITYGW_ADDR"
			return 1
		fi
	fi
	echo "$ADDR" >"$ADDRFILE"
	ROOT_ACCESS_KEY=$ACCESS_KEY ROOT_SECRET_KEY=$SECRET_KEY \
		spawn "$PIDFILE" "$BIN" --port "$ADDR" posix "$STATE/data" >"$LOG" 2>&1 </dev/null
	await_started 100 0.1 "data in $STATE/data"
}

NAME=versitygw
MATCH="versitygw"
STATE_FILES="$ADDRFILE"
. "$ROOT/scripts/lib.sh"
main "$@"
