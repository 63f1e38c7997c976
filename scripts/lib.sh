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

# spawned_alive PIDFILE prints the pid spawn wrote to PIDFILE if that
# process is still running (not exited, nor a zombie). It is for the start
# that spawned it, where a pid so fresh cannot name another process: unlike
# running_pid, which guards stop against a stale pid file, it does not read
# the command line, which reads empty while a process is in the middle of
# exec (Linux shows none until the new program's arguments are in place).
spawned_alive() {
	local pid state
	pid=$(cat "$1" 2>/dev/null) || return 1
	state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1) || return 1
	[ -n "$pid" ] && [ -n "$state" ] && [ "$state" != Z ] || return 1
	echo "$pid"
}

# give_up PIDFILE LOG WHAT: the server WHAT that this start spawned did not
# answer in time. It says whether the server still runs, shows the end of
# LOG, and kills the server by the pid in PIDFILE, so that none is left
# running whatever running_pid would make of it.
give_up() {
	local pid
	if ! pid=$(spawned_alive "$1"); then
		say "$3 exited before it answered; its log:"
		tail -n 30 "$2" >&2 || true
		return 0
	fi
	say "$3 (pid $pid) runs but did not answer in time; its log:"
	tail -n 30 "$2" >&2 || true
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		spawned_alive "$1" >/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

# await_started TRIES INTERVAL [DETAIL] waits, once the server has been
# launched and its pid written, until it answers: then it prints the
# environment. It gives up when the server exits or after TRIES x INTERVAL
# seconds.
await_started() {
	local tries=$1 interval=$2 detail=${3:-}
	for _ in $(seq 1 "$tries"); do
		if answers; then
			say "started (pid $(cat "$PIDFILE")) at $ENDPOINT${detail:+, $detail}, log in $LOG"
			print_env
			return 0
		fi
		spawned_alive "$PIDFILE" >/dev/null || break
		sleep "$interval"
	done
	give_up "$PIDFILE" "$LOG" "$NAME at $ENDPOINT"
	stop >/dev/null 2>&1 || true
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
