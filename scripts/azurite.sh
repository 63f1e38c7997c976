#!/usr/bin/env bash
# azurite.sh installs and runs Azurite, Microsoft's Azure Storage emulator
# (its Blob service only), for the azblob backend's tests. Everything it makes
# stays in the repository's git-ignored .tmp/azurite/ (the npm package, log,
# pid file); the emulator keeps its data in memory.
#
# Usage:
#   scripts/azurite.sh install   npm install azurite into .tmp/azurite
#   scripts/azurite.sh start     install if needed, start it unless it is already
#                                running, wait until it answers, print the
#                                environment the tests read as export lines
#   scripts/azurite.sh env       print those export lines
#   scripts/azurite.sh status    say whether it is running
#   scripts/azurite.sh stop      stop the emulator this script started
#
# A developer runs:
#   eval "$(scripts/azurite.sh start)"
#   (cd azblob && go test ./...)
#
# Settings (environment): AZURITE_ADDR (default 127.0.0.1:10000; when it is
# not set and something this script did not start holds that port, start
# tries 10001 to 10009).
#
# The account and key are Azurite's well-known development account
# (devstoreaccount1), published in Microsoft's documentation: they are not
# secrets, and the emulator listens on loopback only.
set -euo pipefail

# Azurite 3.36 and later need Node >= 21; 3.35.0 runs on Node 20.
VERSION=3.35.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.tmp/azurite
BIN=$STATE/node_modules/.bin/azurite-blob
PIDFILE=$STATE/pid
ADDRFILE=$STATE/addr
LOG=$STATE/log
ACCOUNT=devstoreaccount1
KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

set_addr() {
	ADDR=$1
	ENDPOINT=http://$ADDR/$ACCOUNT
}
if [ -n "${AZURITE_ADDR:-}" ]; then
	set_addr "$AZURITE_ADDR"
elif [ -s "$ADDRFILE" ]; then
	set_addr "$(cat "$ADDRFILE")" # where this script last started it
else
	set_addr 127.0.0.1:10000
fi

installed_version() {
	local pkg=$STATE/node_modules/azurite/package.json
	[ -f "$pkg" ] || return 0
	node -p "require(process.argv[1]).version" "$pkg" 2>/dev/null || true
}

install() {
	if [ "$(installed_version)" = "$VERSION" ] && [ -x "$BIN" ]; then
		return 0
	fi
	if ! command -v npm >/dev/null; then
		say "npm not found: Azurite is a Node.js package (it needs Node >= 20)"
		return 1
	fi
	say "installing azurite $VERSION into $STATE"
	mkdir -p "$STATE"
	if ! npm install --prefix "$STATE" --no-save --no-audit --no-fund --loglevel=error \
		"azurite@$VERSION" >&2; then
		say "npm install azurite@$VERSION failed"
		return 1
	fi
}

answers() {
	# Any HTTP answer (an unauthenticated request gets 400 or 403) means it is up.
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$ADDR/" || true)
	[ -n "$code" ] && [ "$code" != 000 ]
}

print_env() {
	cat <<EOF2
export LEADERELECTION_AZURITE_ENDPOINT=$ENDPOINT
export LEADERELECTION_AZURITE_ACCOUNT=$ACCOUNT
export LEADERELECTION_AZURITE_KEY='$KEY'
export LEADERELECTION_AZURITE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=$ACCOUNT;AccountKey=$KEY;BlobEndpoint=$ENDPOINT;'
EOF2
}

start() {
	install
	mkdir -p "$STATE"
	if pid=$(running_pid); then
		if answers; then
			say "already running (pid $pid) at $ENDPOINT"
			print_env
			return 0
		fi
	elif answers; then
		if [ -n "${AZURITE_ADDR:-}" ]; then
			say "something not started by this script already answers at $ADDR; stop it or set another AZURITE_ADDR"
			return 1
		fi
		local port found=
		for port in 10000 10001 10002 10003 10004 10005 10006 10007 10008 10009; do
			set_addr 127.0.0.1:$port
			if ! answers; then
				found=1
				break
			fi
		done
		if [ -z "$found" ]; then
			say "ports 10000-10009 on 127.0.0.1 are all taken; set AZURITE_ADDR"
			return 1
		fi
	fi
	echo "$ADDR" >"$ADDRFILE"
	# --loose and --skipApiVersionCheck: accept the headers and API versions
	# of SDKs newer than this Azurite. --disableTelemetry: it would otherwise
	# report to Microsoft. --inMemoryPersistence: no data on
	# disk (it runs in $STATE all the same, should it write anything).
	(cd "$STATE" && spawn "$PIDFILE" "$BIN" --inMemoryPersistence --skipApiVersionCheck --loose --disableTelemetry --silent \
		--blobHost "${ADDR%:*}" --blobPort "${ADDR##*:}" >"$LOG" 2>&1 </dev/null)
	await_started 150 0.1
}

NAME=azurite
MATCH="azurite"
STATE_FILES="$ADDRFILE"
. "$ROOT/scripts/lib.sh"
main "$@"
