# lib.sh: what the test-server scripts share. A script sets NAME (its own
# name, for messages), MATCH (a string in its server's command line),
# PIDFILE, LOG and ENDPOINT, defines answers (does the server answer?) and
# its own install, start and print_env, then sources this file and calls
# main "$@".

say() { echo "$NAME.sh: $*" >&2; }

# spawn PIDFILE COMMAND [ARG...] runs COMMAND in the background in a session
# of its own, and has it write its own pid to PIDFILE (sh writes it, then
# execs the command), so that PIDFILE names the server even where setsid
# forks, as it does when the caller leads a process group (a shell with job
# control): $! would name the setsid that exited. It returns once PIDFILE is
# written. Redirections given to spawn apply to the command.
spawn() {
	local pidfile=$1
	shift
	rm -f "$pidfile"
	setsid nohup sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" &
	for _ in $(seq 1 100); do
		[ -s "$pidfile" ] && return 0
		sleep 0.05
	done
	return 1
}

# running_pid prints the pid of the server this script started, if it runs.
running_pid() {
	[ -f "$PIDFILE" ] || return 1
	local pid
	pid=$(cat "$PIDFILE")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$MATCH"; then
		echo "$pid"
		return 0
	fi
	return 1
}

# await_started TRIES INTERVAL [DETAIL] waits, once the server has been
# launched and its pid written, until it answers: then it prints the
# environment. It gives up when the server exits or after TRIES x INTERVAL
# seconds, showing the end of its log.
await_started() {
	local tries=$1 interval=$2 detail=${3:-}
	for _ in $(seq 1 "$tries"); do
		if answers; then
			say "started (pid $(cat "$PIDFILE")) at $ENDPOINT${detail:+, $detail}, log in $LOG"
			print_env
			return 0
		fi
		# A server that exited is given up on.
		if ! running_pid >/dev/null; then
			break
		fi
		sleep "$interval"
	done
	say "$NAME did not answer at $ENDPOINT; its log:"
	tail -n 30 "$LOG" >&2 || true
	stop || true
	return 1
}

# stop stops the server this script started and removes its pid file and
# STATE_FILES (the address or port it chose).
stop() {
	local pid
	if pid=$(running_pid); then
		kill "$pid"
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		say "stopped (pid $pid)"
	else
		say "not running"
	fi
	rm -f "$PIDFILE" ${STATE_FILES:-}
}

status() {
	local pid
	if pid=$(running_pid) && answers; then
		say "running (pid $pid) at $ENDPOINT"
	else
		say "not running"
		return 1
	fi
}

main() {
	case "${1:-}" in
	install) install ;;
	start) start ;;
	env) print_env ;;
	status) status ;;
	stop) stop ;;
	*)
		echo "usage: $0 install|start|env|status|stop" >&2
		exit 2
		;;
	esac
}
