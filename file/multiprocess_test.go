//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
)

// The helper processes: the test binary re-executed with helperEnv set to the
// role it plays.
const (
	helperEnv  = "FILE_TEST_HELPER"
	pathEnv    = "FILE_TEST_PATH"
	writersEnv = "FILE_TEST_WRITERS"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "racer":
		racer()
	case "writer":
		writer()
	case "mounts":
		mountsHelper()
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
	os.Exit(0)
}

// racer runs writers goroutines, each with its own Decider, in one helper
// process. For each line "ROUND TOKEN" on stdin they all write at once,
// conditioned on TOKEN; it answers "ROUND WRITEID..." with the winners' write
// ids (none, one or more) on stdout.
func racer() {
	n, _ := strconv.Atoi(os.Getenv(writersEnv))
	ds := make([]*file.Decider, n)
	for i := range ds {
		d, err := file.NewDecider(os.Getenv(pathEnv))
		if err != nil {
			fmt.Println("ERR", err)
			return
		}
		ds[i] = d
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var round int64
		var tok string
		if _, err := fmt.Sscan(in.Text(), &round, &tok); err != nil {
			fmt.Println("ERR bad line", in.Text())
			return
		}
		var (
			mu      sync.Mutex
			winners []string
			wg      sync.WaitGroup
		)
		for i, d := range ds {
			wg.Go(func() {
				id := fmt.Sprintf("p%d-g%d-r%d", os.Getpid(), i, round)
				_, err := d.WriteEntry(context.Background(), record(round, id, entry.LeaderToken{Version: tok}))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, id)
				case !errors.Is(err, entry.ErrRaceLost):
					winners = append(winners, "ERR:"+strings.ReplaceAll(err.Error(), " ", "_"))
				}
			})
		}
		wg.Wait()
		fmt.Println(round, strings.Join(winners, " "))
	}
}

// writer extends the record in a loop as fast as it can, printing a line
// after each write, until it is killed.
func writer() {
	d, err := file.NewDecider(os.Getenv(pathEnv))
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		cur, err := d.ReadCurrent(ctx)
		if err != nil {
			fmt.Println("ERR", err)
			return
		}
		next := record(cur.ElectionNumber+1, fmt.Sprintf("p%d-%d", os.Getpid(), i), cur.Token)
		next.ConnectionParams = make([]byte, 4096) // a longer write, easier to interrupt
		if _, err := d.WriteEntry(ctx, next); err != nil && !errors.Is(err, entry.ErrRaceLost) {
			fmt.Println("ERR", err)
			return
		}
		fmt.Println("wrote", i)
	}
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startHelper(t *testing.T, role, path string, extraEnv ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, pathEnv+"="+path)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &helper{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
}

// readLine reads the helper's next output line, failing after timeout.
func (h *helper) readLine(t *testing.T, timeout time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if h.lines.Scan() {
			got <- h.lines.Text()
		} else {
			got <- "EOF " + fmt.Sprint(h.lines.Err())
		}
	}()
	select {
	case l := <-got:
		if strings.HasPrefix(l, "ERR") || strings.HasPrefix(l, "EOF") {
			t.Fatalf("helper %d: %s", h.cmd.Process.Pid, l)
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("helper %d said nothing for %v", h.cmd.Process.Pid, timeout)
		return ""
	}
}

// TestProcessesRace has several processes, each with several writers, race
// conditional writes on one file: exactly one winner per round.
func TestProcessesRace(t *testing.T) {
	const (
		processes = 4
		writers   = 4
		rounds    = 20
	)
	path := filepath.Join(t.TempDir(), "record")
	d := newDecider(t, path)
	tok, err := d.WriteEntry(t.Context(), record(0, "seed", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]*helper, processes)
	for i := range hs {
		hs[i] = startHelper(t, "racer", path, writersEnv+"="+strconv.Itoa(writers))
	}
	for round := int64(1); round <= rounds; round++ {
		for _, h := range hs {
			if _, err := fmt.Fprintln(h.stdin, round, tok.Version); err != nil {
				t.Fatal(err)
			}
		}
		var winners []string
		for _, h := range hs {
			fields := strings.Fields(h.readLine(t, 30*time.Second))
			if fields[0] != strconv.FormatInt(round, 10) {
				t.Fatalf("helper answered %q in round %d", fields, round)
			}
			winners = append(winners, fields[1:]...)
		}
		if len(winners) != 1 || strings.HasPrefix(winners[0], "ERR:") {
			t.Fatalf("round %d: winners %q among %d processes x %d writers; want exactly one", round, winners, processes, writers)
		}
		cur, err := d.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if cur.WriteID != winners[0] || cur.ElectionNumber != round {
			t.Fatalf("round %d: stored %q (election %d), winner %q", round, cur.WriteID, cur.ElectionNumber, winners[0])
		}
		tok = cur.Token
	}
}

// TestKilledWritersLeaveWholeRecords kills processes that write as fast as
// they can at random moments: the record always decodes, and the next write
// goes through (a dead holder's lock is gone with it).
func TestKilledWritersLeaveWholeRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d := newDecider(t, path)
	if _, err := d.WriteEntry(t.Context(), record(0, "seed", entry.LeaderToken{})); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		a := startHelper(t, "writer", path)
		b := startHelper(t, "writer", path)
		for range 1 + rand.IntN(30) {
			a.readLine(t, 30*time.Second)
		}
		// Kill at a random instant within a write, not right after one.
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = a.cmd.Wait()
		b.readLine(t, 30*time.Second) // b still gets through
		if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = b.cmd.Wait()

		cur, err := d.ReadCurrent(t.Context())
		if err != nil {
			t.Fatalf("iteration %d: record after killing its writers: %v", i, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err = d.WriteEntry(ctx, record(cur.ElectionNumber+1, fmt.Sprintf("check-%d", i), cur.Token))
		cancel()
		if err != nil {
			t.Fatalf("iteration %d: write after killing the writers: %v", i, err)
		}
	}
}
