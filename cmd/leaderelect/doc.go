// Command leaderelect runs leader elections from the shell: it runs any
// command as a singleton across machines, shows and follows an election's
// record, and demonstrates an election in one process.
//
//	leaderelect demo
//	leaderelect run --store file:///var/lib/reports/leader -- ./send-reports
//	leaderelect status --store gs://my-bucket/leaders/reports
//	leaderelect watch --store s3://my-bucket/leaders/reports?region=eu-west-1 --json
//
// Run "leaderelect help" for the commands and store URLs, and
// "leaderelect COMMAND --help" for each command's flags and behaviour. Every
// flag can also be set by an environment variable: --store by
// LEADERELECT_STORE, --term by LEADERELECT_TERM, and so on; a flag given on
// the command line wins.
//
// # run
//
// leaderelect run campaigns for the election at --store and runs COMMAND
// while it leads, with LEADER_ID, LEADER_TERM (the fencing token) and
// LEADER_EXPIRY in its environment. COMMAND never runs past the end of the
// term this process holds: when leadership is lost, or the term is about to
// end without an extension, COMMAND gets SIGTERM, then SIGKILL after --grace
// and in any case just before the term ends (when another candidate has
// taken over, the term is over already: SIGKILL follows SIGTERM at once,
// with no grace, since another leader may be acting); the term is released only
// after COMMAND has been reaped and (on Linux) every process left in its
// process group is gone. On Linux, a watchdog process holds the
// term's deadline and kills COMMAND's process group when it passes, even
// while leaderelect itself is stopped or starved of CPU; on Linux and
// FreeBSD, COMMAND also gets SIGKILL from the kernel if leaderelect dies
// first. A paused host and processes that leave COMMAND's process group are
// not covered: pass LEADER_TERM to what COMMAND writes to. See
// "leaderelect run --help".
//
// # Exit status
//
//	0    success
//	1    demo: the safety check failed
//	2    usage error: bad flag, environment variable or store URL
//	125  leaderelect failed: store unreachable, permission denied, corrupt record;
//	     demo: the election did not move as the story needs
//	126  run: the command could not be started
//	127  run: the command was not found
//	N    run: the command's own exit status (128+S if signal S killed it)
//
// leaderelect run stopped by SIGINT, SIGTERM or SIGHUP stops COMMAND,
// releases the term and then exits by that same signal, so that a shell
// reports 130, 143 or 129 and a service manager sees a clean stop; stopped
// by SIGQUIT, it does the same and exits 131 (without Go's goroutine dump).
// SIGHUP and SIGINT stay ignored if they were when it started (nohup, a
// background job of a script).
// A broken stderr does not stop it. It is not an init: as a container's PID
// 1 it does not reap the orphans re-parented to it (run it under docker run
// --init or tini). watch exits 0 when interrupted (SIGINT, SIGTERM); it too
// leaves SIGINT ignored if it was when it started.
package main
