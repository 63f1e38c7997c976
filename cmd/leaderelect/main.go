package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/redact"
)

// Exit codes. run also exits with its command's status; see the package
// documentation.
const (
	exitOK         = 0
	exitViolation  = 1   // demo: the safety check failed
	exitUsage      = 2   // bad flag, argument, environment variable or store URL
	exitFailed     = 125 // leaderelect itself failed: store unreachable, permission denied, corrupt record
	exitCannotExec = 126 // run: the command was found but could not be started
	exitNotFound   = 127 // run: the command was not found
)

// envPrefix starts the environment variable that sets each flag: --store is
// LEADERELECT_STORE, --max-wait would be LEADERELECT_MAX_WAIT.
const envPrefix = "LEADERELECT_"

// outcome is how a subcommand ends: an exit code, or a signal that
// leaderelect re-raises on itself once it has cleaned up, so that its parent
// sees it stopped by that signal.
type outcome struct {
	code   int
	signal syscall.Signal
}

type subcommand struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) outcome
}

func subcommands() []subcommand {
	return []subcommand{
		{"run", "run a command while this process is the leader", runMain},
		{"status", "show the current election record", statusMain},
		{"watch", "print one line per change of the election record", watchMain},
		{"demo", "watch an election among in-process candidates, with crashes", demoMain},
	}
}

func main() {
	o := dispatch(os.Args[1:], os.Stdout, os.Stderr)
	if o.signal != 0 {
		reraise(o.signal)
	}
	os.Exit(o.code)
}

// isHelp reports whether arg asks for help, as a command or a flag.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

func dispatch(args []string, stdout, stderr io.Writer) outcome {
	if len(args) == 0 {
		usage(stderr)
		return outcome{code: exitUsage}
	}
	name := args[0]
	switch name {
	case watchdogCommand:
		// Hidden: run starts it; see watchdog_linux.go. It shares run's
		// stderr, which may be a broken pipe, and its stdout is a pipe
		// run may have stopped reading: its messages must not kill it
		// before it has acted.
		defer notifyBrokenPipe()()
		return outcome{code: watchdogMain(os.Stdin, stdout, stderr)}
	case "help", "-h", "-help", "--help": // isHelp
		if len(args) > 1 && !isHelp(args[1]) {
			return dispatch([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return outcome{}
	}
	for _, c := range subcommands() {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "leaderelect: unknown command %q\n\n", name)
	usage(stderr)
	return outcome{code: exitUsage}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `leaderelect runs leader elections on a shared store: run any command as a
singleton across machines, or look at an election.

Usage:
  leaderelect COMMAND [FLAGS] [ARGS]

Commands:
`)
	for _, c := range subcommands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Start with:
  leaderelect demo

"leaderelect COMMAND --help" describes a command. Every flag can also be set by
an environment variable: --store by LEADERELECT_STORE, --term by
LEADERELECT_TERM, and so on; a flag on the command line wins.

Store URLs:
`+storeURLHelp+exitCodeHelp)
}

const storeURLHelp = `  file:///PATH/TO/RECORD   a file on this host or a shared POSIX filesystem
                           (a PATH.lock file is created next to it)
  gs://BUCKET/OBJECT[?kms_key_name=K&predefined_acl=A&min_write_interval=D]
                           Google Cloud Storage, Application Default Credentials
  s3://BUCKET/KEY[?region=R&endpoint=URL&path_style=true]
                           Amazon S3 or an S3-compatible store, with the AWS SDK's
                           default credentials and configuration
  azblob://CONTAINER/BLOB[?storage_account=NAME&endpoint=URL]
                           Azure Blob Storage; credentials from AZURE_STORAGE_*
                           variables, else Azure's default credential chain
  dynamodb://TABLE/KEY[?region=R&endpoint=URL]
                           one item in an Amazon DynamoDB table, with the AWS
                           SDK's default credentials and configuration
  postgres://USER@HOST:PORT/DATABASE?table=TABLE&election=NAME
                           one row in a PostgreSQL table (libpq parameters such
                           as sslmode accepted; postgresql:// too)
  k8s://NAMESPACE/NAME[?context=CONTEXT]
                           a Kubernetes Lease, with kubectl's configuration
                           ($KUBECONFIG, ~/.kube/config, else in-cluster)
  mem://NAME               in-process memory: only for tests and demos
`

const exitCodeHelp = `
Exit status:
  0    success
  1    demo: the safety check failed
  2    usage error: bad flag, environment variable or store URL
  125  leaderelect failed: store unreachable, permission denied, corrupt record;
       demo: the election did not move as the story needs
  126  run: the command could not be started
  127  run: the command was not found
  N    run: the command's own exit status (128+S if signal S killed it)
  run stopped by SIGINT, SIGTERM or SIGHUP exits by that same signal once the
  command has stopped and the term is released (a shell shows 130, 143 or
  129); stopped by SIGQUIT, it exits 131.
`

// flagSet is a subcommand's flags, with the environment variables that set
// them.
type flagSet struct {
	*flag.FlagSet
	name, synopsis, description string
	stdout                      io.Writer
}

func newFlagSet(name, synopsis, description string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{
		FlagSet:     flag.NewFlagSet("leaderelect "+name, flag.ContinueOnError),
		name:        name,
		synopsis:    synopsis,
		description: description,
		stdout:      stdout,
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// isSet reports whether the flag was given on the command line or by its
// environment variable (parse sets both through the flag package).
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse parses args, then sets each flag not given on the command line from
// its environment variable. It prints the help on --help. It returns false
// with the outcome when the caller should stop.
func (fs *flagSet) parse(args []string) (outcome, bool) {
	// The flag package's own message names flags with one dash; parse
	// quietly and say it in leaderelect's words.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.printHelp(fs.stdout)
			return outcome{}, false
		}
		return fs.usageError("%s", fs.flagError(err)), false
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := os.LookupEnv(envName(f.Name))
		if given[f.Name] || !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v%s", envName(f.Name), v, err, valueHint(f, v)))
		}
	})
	if len(errs) > 0 {
		return fs.usageError("invalid environment variable %s", strings.Join(errs, "; ")), false
	}
	return outcome{}, true
}

// dashedFlag is a flag name as the flag package writes it in its errors,
// with one dash.
var dashedFlag = regexp.MustCompile(`(^|[ :])-([A-Za-z][A-Za-z0-9_-]*)`)

// flagError rewrites an error of the flag package with the double-dash flag
// names leaderelect documents, and adds a hint saying what the flag takes.
func (fs *flagSet) flagError(err error) string {
	msg := dashedFlag.ReplaceAllString(err.Error(), "$1--$2")
	// invalid value "2" for flag --term: parse error
	// invalid boolean value "maybe" for --json: parse error
	var value, name string
	if _, scanErr := fmt.Sscanf(msg, "invalid value %q for flag --%s", &value, &name); scanErr != nil {
		if _, scanErr := fmt.Sscanf(msg, "invalid boolean value %q for --%s", &value, &name); scanErr != nil {
			return msg
		}
	}
	if f := fs.Lookup(strings.TrimSuffix(name, ":")); f != nil {
		msg += valueHint(f, value)
	}
	return msg
}

// valueHint says what f takes when value is not that: how to write a
// duration (a bare number is the commonest mistake), or a boolean.
func valueHint(f *flag.Flag, value string) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return " (want true or false)"
	case time.Duration:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf(" (a duration needs a unit: %ss, %sms or %sm)", value, value, value)
		}
		return " (a duration is a number with a unit: 15s, 500ms, 1m30s)"
	}
	return ""
}

func (fs *flagSet) usageError(format string, args ...any) outcome {
	fmt.Fprintf(fs.Output(), "leaderelect %s: %s\nRun 'leaderelect %s --help' for usage.\n",
		fs.name, fmt.Sprintf(format, args...), fs.name)
	return outcome{code: exitUsage}
}

func (fs *flagSet) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: leaderelect %s %s\n\n%s\n\nFlags (each also set by the environment variable shown):\n",
		fs.name, fs.synopsis, strings.TrimSpace(fs.description))
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		arg, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if arg != "" {
			head += " " + arg
		}
		fmt.Fprintf(w, "%s   [$%s]\n", head, envName(f.Name))
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "      %s%s\n", usage, def)
	}
}

// noStore is the usage error for a missing --store.
func noStore(fs *flagSet) outcome {
	return fs.usageError("--store is required (or set %s); for example --store file:///var/lib/myjob/leader", envName("store"))
}

// openStore opens the store at rawURL and reads the record once, so that a
// bad URL, missing credentials or an unreachable store is reported at once
// and clearly rather than retried forever.
func openStore(fs *flagSet, rawURL string, timeout time.Duration) (leaderelection.RaceDecider, *entry.RaceEntry, outcome, bool) {
	if rawURL == "" {
		return nil, nil, noStore(fs), false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d, err := leaderelection.OpenDecider(ctx, rawURL)
	if errors.Is(err, leaderelection.ErrBadURL) {
		return nil, nil, fs.usageError("%v", err), false
	}
	if err != nil {
		return nil, nil, fs.failed("%v", err), false
	}
	rec, err := d.ReadCurrent(ctx)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return nil, nil, fs.failed("cannot read the election record at %s: %v", redact.URL(rawURL), err), false
	}
	return d, rec, outcome{}, true
}

// strayArgs says that args, arguments a command does not take, were given.
// They are shown through redact, with the value of every query parameter
// hidden: a store URL given without --store may carry a password or a
// token. One that looks like a URL gets a hint.
func strayArgs(args []string) string {
	shown := make([]string, len(args))
	hint := ""
	for i, a := range args {
		shown[i] = redact.Accepting(a, nil)
		if strings.Contains(a, "://") {
			hint = " (did you mean --store URL?)"
		}
	}
	return fmt.Sprintf("unexpected arguments %q%s", shown, hint)
}

func (fs *flagSet) failed(format string, args ...any) outcome {
	fmt.Fprintf(fs.Output(), "leaderelect %s: %s\n", fs.name, fmt.Sprintf(format, args...))
	return outcome{code: exitFailed}
}

// durationText formats d for people: 1.5s, 250ms, 2m0s. A duration at
// either end of time.Duration's range (which time.Time.Sub saturates to for
// instants more than about 292 years apart, such as a record's zero or
// year-9999 expiry) is "over 292 years".
func durationText(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + durationText(absDuration(d))
	case d == math.MaxInt64:
		return "over 292 years"
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return d.Round(time.Millisecond).String()
}

// absDuration is |d|, with math.MinInt64 (whose negation overflows) taken
// for math.MaxInt64: both stand for a saturated time.Time.Sub.
func absDuration(d time.Duration) time.Duration {
	switch {
	case d == math.MinInt64:
		return math.MaxInt64
	case d < 0:
		return -d
	}
	return d
}
