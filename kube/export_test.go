package kube

import "time"

// SetWatchTiming sets the timing of d's watch, before its first
// WaitForChange: the server ends each watch after timeout, the watcher
// itself margin later, or once it has been silent for silence; waiters
// wait grace for a watch that ended to be replaced.
func SetWatchTiming(d *Decider, timeout, margin, silence, grace time.Duration) {
	d.timing = watchTiming{timeoutMin: timeout, timeoutMax: timeout, margin: margin, silence: silence, grace: grace}
}
