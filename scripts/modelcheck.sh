#!/usr/bin/env bash
# modelcheck.sh checks the protocol model model/election.pml with spin:
# exhaustively for the protocol as designed, and once per mutant, each of
# which must be caught. It prints a table and exits 0 only if the model
# holds and every mutant fails.
#
# Usage: scripts/modelcheck.sh
#
# Needs spin (installed with apt-get when missing and run as root) and gcc.
# Generated files (pan*, trails) go to a temporary directory, removed on
# exit unless MODELCHECK_KEEP=1. Bounds can be overridden with SPIN_DEFS,
# e.g. SPIN_DEFS="-DMAXT=7".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL=$ROOT/model/election.pml
DEFS=${SPIN_DEFS:-}

if ! command -v spin >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && apt-get install -y -qq spin >/dev/null
	else
		echo "modelcheck: spin is not installed (Debian: apt-get install spin)" >&2
		exit 2
	fi
fi
command -v gcc >/dev/null || { echo "modelcheck: gcc is needed" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/modelcheck.XXXXXX")
if [ "${MODELCHECK_KEEP:-}" = 1 ]; then
	echo "modelcheck: keeping generated files in $TMP (replay a trail there:" \
		"cd $TMP/NAME && spin -t -p -g election.pml, with the same -D flags)"
else
	trap 'rm -rf "$TMP"' EXIT
fi

# check NAME EXPECT [-DMUTANT]: EXPECT is "holds" or "caught".
fails=0
check() {
	local name=$1 expect=$2 def=${3:-} dir=$TMP/$1
	mkdir -p "$dir"
	cp "$MODEL" "$dir/election.pml"
	local start end
	start=$(date +%s.%N)
	(
		cd "$dir"
		# shellcheck disable=SC2086
		spin $DEFS $def -a election.pml >spin.log 2>&1
		gcc -O2 -w -DSAFETY -DNOFAIR -o pan pan.c
		# -E: processes still waiting when time runs out at MAXT are
		# not deadlocks. -m: the search depth stays far below it.
		./pan -E -m100000 >pan.log 2>&1 || true
	)
	end=$(date +%s.%N)
	local log=$dir/pan.log states errors depth result
	states=$(awk '/states, stored/ {print $1; exit}' "$log")
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | head -1)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | head -1)
	if grep -q 'max search depth too small' "$log" || [ -z "$errors" ]; then
		result="INCOMPLETE"
	elif [ "$expect" = holds ]; then
		if [ "$errors" = 0 ]; then result="holds"; else result="FAILS"; fi
	else
		if [ "$errors" != 0 ]; then result="caught"; else result="NOT CAUGHT"; fi
	fi
	case $result in holds | caught) ;; *) fails=$((fails + 1)) ;; esac
	local what=""
	if [ "$errors" != 0 ]; then
		what=$(grep -m1 -o 'assertion violated (wen>maxTerm)' "$log" >/dev/null && echo fencing || echo "mutual exclusion")
	fi
	printf '%-10s %12s %6s %-11s %-17s %7.1f\n' "$name" "${states:-?}" "${depth:-?}" "$result" "$what" \
		"$(echo "$end - $start" | bc)"
	if [ "$result" != holds ] && [ "$result" != caught ]; then
		sed -n '1,20p' "$log" >&2
	fi
}

printf '%-10s %12s %6s %-11s %-17s %7s\n' model/mutant states depth result violation seconds
check model holds
check NOSKEW caught -DNOSKEW
check EARLYREL caught -DEARLYREL
check LIDADOPT caught -DLIDADOPT
check DELFREE caught -DDELFREE

if [ "$fails" != 0 ]; then
	echo "modelcheck: $fails check(s) did not come out as expected" >&2
	exit 1
fi
echo "modelcheck: the model holds and every mutant is caught"
