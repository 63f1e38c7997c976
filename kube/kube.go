package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

var (
	errRaceLost  = entry.ErrRaceLost
	errThrottled = entry.ErrThrottled
	errRefused   = entry.ErrRefused
)

// Decider is a leaderelection.RaceDecider and leaderelection.ChangeNotifier
// on one coordination.k8s.io/v1 Lease. It is safe for concurrent use. Close
// stops the watch that WaitForChange starts.
type Decider struct {
	leases    leaseAPI
	namespace string
	lease     string
	name      string // "k8s://NAMESPACE/NAME", for errors and String
	backoff   backoff.Backoff
	timing    watchTiming

	// sent counts the requests sent to the API server; unauthorized is
	// sent as it was when the first of the last answers, all 401s, came,
	// or 0 when the last answer was not a 401 (see fail).
	sent, unauthorized atomic.Uint64

	mu   sync.Mutex
	last *coordinationv1.Lease // the Lease most recently read or written
	// written is the Lease most recently written (see wrote).
	written *coordinationv1.Lease
	w       *watcher
	closed  bool
}

// NewDecider returns a Decider on the Lease name in namespace, through
// client. The Lease need not exist: the first election creates it. The
// namespace must exist: a missing namespace is a refusal (entry.ErrRefused).
//
// The client's identity needs get, list, watch, create and update on Leases
// in namespace (see the package documentation for a Role). client-go limits
// each client's request rate on its side (rest.Config.QPS and Burst, 5 and 10
// by default); an election needs only a few requests per term, but many
// Deciders sharing one client add up.
//
// Each request is a single attempt, without client-go's retries (which pause
// a second or more, and can turn an applied update into a 409): the engine
// retries with its own backoff, within the time the term allows.
func NewDecider(client kubernetes.Interface, namespace, name string) (*Decider, error) {
	if client == nil {
		return nil, errors.New("kube: NewDecider with a nil client")
	}
	if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		// A clientset left nil, as kubernetes.NewForConfig returns one
		// with its error: its methods would panic on the first call.
		return nil, fmt.Errorf("kube: NewDecider with a nil client (%T)", client)
	}
	if err := checkNames(namespace, name); err != nil {
		return nil, err
	}
	return &Decider{
		leases:    leasesOf(client, namespace),
		namespace: namespace,
		lease:     name,
		name:      "k8s://" + namespace + "/" + name,
		backoff:   defaultBackoff,
		timing:    defaultWatchTiming,
	}, nil
}

// NewDeciderForConfig is NewDecider with a client made from cfg, such as
// rest.InClusterConfig's or one loaded from a kubeconfig by
// k8s.io/client-go/tools/clientcmd.
func NewDeciderForConfig(cfg *rest.Config, namespace, name string) (*Decider, error) {
	if cfg == nil {
		return nil, errors.New("kube: NewDeciderForConfig with a nil rest.Config")
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: client for %s: %w", cfg.Host, err)
	}
	return NewDecider(client, namespace, name)
}

// Namespace returns the namespace of the Lease.
func (d *Decider) Namespace() string { return d.namespace }

// Name returns the name of the Lease.
func (d *Decider) Name() string { return d.lease }

// String names the Lease as its URL does (k8s://NAMESPACE/NAME), for the
// engine's errors, logs and metrics.
func (d *Decider) String() string { return d.name }

// Close stops the watch WaitForChange runs, if any; later WaitForChange
// calls fail. ReadCurrent and WriteEntry keep working.
func (d *Decider) Close() error {
	d.mu.Lock()
	w := d.w
	d.closed, d.w = true, nil
	d.mu.Unlock()
	if w != nil {
		w.stop()
	}
	return nil
}

// remember keeps l as the Lease most recently seen, so that a write
// conditioned on its resourceVersion can start from it (keeping its labels,
// other annotations and spec fields) without reading it again.
func (d *Decider) remember(l *coordinationv1.Lease) {
	d.unauthorized.Store(0)
	d.mu.Lock()
	d.last = l
	d.mu.Unlock()
}

// wrote is remember for a Lease this Decider wrote, which it also keeps
// apart: a leader's next extension is conditioned on it, and reads between
// (a Watch or a resolver on the same Decider) must not make it fetch the
// Lease again, finding a resourceVersion that metadata edited since moved
// on, and lose a race nobody ran (see WriteEntry).
func (d *Decider) wrote(l *coordinationv1.Lease) {
	d.remember(l)
	d.mu.Lock()
	d.written = l
	d.mu.Unlock()
}

// ReadCurrent implements leaderelection.RaceDecider. It reads the Lease
// with a quorum read (no resourceVersion, so not from the watch cache).
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kube: read %s: %w", d.name, err)
	}
	sent := d.sending()
	l, err := d.leases.Get(ctx, d.lease, metav1.GetOptions{})
	if err != nil {
		if c, _ := classify(err, reqGet); c == missing {
			return d.readMissing(ctx)
		}
		return nil, d.fail(ctx, "read", reqGet, sent, err)
	}
	d.remember(l)
	return d.toEntry(l)
}

// readMissing tells a missing Lease from a missing namespace, which a GET
// does not: both are a bare 404 for the Lease. A dry-run create (never
// applied, needs only the create permission the Decider needs anyway) is
// refused with a 404 naming the namespace when that is what is missing.
// When the dry run is forbidden (an observer allowed only to read), the
// Lease counts as missing: there is no way to tell.
func (d *Decider) readMissing(ctx context.Context) (*entry.RaceEntry, error) {
	d.unauthorized.Store(0) // the 404 was an answer to our credentials
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: d.lease, Namespace: d.namespace}}
	sent := d.sending()
	_, err := d.leases.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		if c, _ := classify(err, reqCreate); c == refused && !isForbidden(err) {
			return nil, d.fail(ctx, "read", reqCreate, sent, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kube: read %s: %w", d.name, ctx.Err())
		}
	}
	return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
}

// WriteEntry implements leaderelection.RaceDecider: a create when
// rentry.Token is zero, otherwise an update conditioned on the
// resourceVersion in rentry.Token. The update starts from the Lease as last
// read or written, or as the watch last delivered it (one GET first if this
// Decider has not seen that version), so that fields and annotations it does
// not own are kept. An update answered 409 Conflict over a Lease whose record
// (our annotation and the spec, on the same Lease: not one deleted and
// created again) is unchanged, its metadata alone edited, is sent again over
// the Lease as it is now, metadataRetries updates in all at most.
// So is the first update when the GET finds the Lease at another version than
// the token's: a LIST at exactly the token's version tells whether its
// record is still the one conditioned on.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("kube: write %s: %w", d.name, err)
	}
	data, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("kube: write %s: %w", d.name, err)
	}
	now := time.Now()
	if rentry.Token.IsZero() {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: d.lease, Namespace: d.namespace}}
		setRecord(l, rentry, data, nil, now)
		sent := d.sending()
		out, err := d.leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return entry.LeaderToken{}, d.fail(ctx, "create", reqCreate, sent, err)
		}
		d.wrote(out)
		return token(out), nil
	}

	prev := d.seen(rentry.Token.Version)
	if prev == nil {
		// A token this Decider no longer has (another Decider's, or
		// one that a read since, a Watch on this Decider say, moved
		// past): fetch the Lease to write over.
		sent := d.sending()
		cur, err := d.leases.Get(ctx, d.lease, metav1.GetOptions{})
		if err != nil {
			if c, _ := classify(err, reqGet); c == missing {
				return entry.LeaderToken{}, fmt.Errorf("kube: write %s: the Lease conditioned on was deleted: %w", d.name, errRaceLost)
			}
			// Nothing was written: a refusal or throttling of the GET
			// is one of the write too; anything else is as unknown as
			// the write would have been, and reading back finds that
			// it was not applied.
			return entry.LeaderToken{}, d.fail(ctx, "write (reading the Lease first)", reqGet, sent, err)
		}
		d.remember(cur)
		if cur.ResourceVersion != rentry.Token.Version {
			// The Lease moved on: write over it only if its record is
			// still the one conditioned on (its metadata alone edited),
			// as the retries below do after a 409.
			if why := d.recordSince(ctx, rentry.Token.Version, cur); why != "" {
				return entry.LeaderToken{}, fmt.Errorf("kube: write %s: the Lease changed since it was read (resourceVersion %s, conditioned on %s): %s: %w",
					d.name, cur.ResourceVersion, rentry.Token.Version, why, errRaceLost)
			}
		}
		prev = cur
	}
	for attempt := 1; ; attempt++ {
		l := prev.DeepCopy()
		setRecord(l, rentry, data, prev, now)
		sent := d.sending()
		out, err := d.leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			d.wrote(out)
			return token(out), nil
		}
		werr := d.fail(ctx, "update", reqUpdate, sent, err)
		if !errors.Is(werr, errRaceLost) || !apierrors.IsConflict(err) || attempt == metadataRetries {
			return entry.LeaderToken{}, werr
		}
		// The Lease changed since prev, and the update was not applied.
		// A change of its metadata alone (kubectl label or annotate, a
		// controller adding an owner reference) leaves the record
		// conditioned on in place: write over the Lease as it is now,
		// rather than report a lost race, which ends a leader's tenure.
		// Any write of a record changes the annotation (its write id).
		sent = d.sending()
		cur, gerr := d.leases.Get(ctx, d.lease, metav1.GetOptions{})
		if gerr != nil {
			// Not applied, whatever the GET met: the engine reads. The
			// GET's answer counts as any other (a 401 toward the
			// second in a row that is a refusal).
			return entry.LeaderToken{}, fmt.Errorf("%w; reading the Lease again: %v", werr,
				d.fail(ctx, "read", reqGet, sent, gerr))
		}
		d.remember(cur)
		if !sameRecord(cur, prev) {
			return entry.LeaderToken{}, werr
		}
		prev = cur
	}
}

// recordSince returns "" if cur, the Lease as it is now, holds the same
// record (sameRecord) as the Lease at resourceVersion rv, which this Decider
// no longer has: it reads that version back with a LIST at exactly rv (the
// API server keeps a few minutes of history). Otherwise it says why the
// write conditioned on rv is a lost race: the record changed, or the version
// could not be read (compacted, or the LIST failed), so that whether only
// the metadata changed cannot be told. Nothing is written either way.
func (d *Decider) recordSince(ctx context.Context, rv string, cur *coordinationv1.Lease) string {
	sent := d.sending()
	ls, err := d.leases.List(ctx, metav1.ListOptions{
		FieldSelector:        d.selector(),
		ResourceVersion:      rv,
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil {
		return fmt.Sprintf("reading resourceVersion %s back to compare records failed (%v)", rv, d.fail(ctx, "list", reqWatch, sent, err))
	}
	d.unauthorized.Store(0)
	for i := range ls.Items {
		if old := &ls.Items[i]; old.Name == d.lease && old.ResourceVersion == rv {
			switch {
			case sameRecord(cur, old):
				return ""
			case cur.UID != old.UID:
				return "it was deleted and created again"
			}
			return "its record changed"
		}
	}
	return fmt.Sprintf("no Lease at resourceVersion %s to compare records with", rv)
}

// metadataRetries is how many updates WriteEntry sends over a Lease whose
// metadata alone keeps changing under it before it reports a lost race.
const metadataRetries = 3

// sameRecord reports whether a and b hold the same election record: the
// same Lease (metadata.uid), with the same annotation of ours (or none) and
// the same spec, whatever else of their metadata differs. A Lease deleted
// and created again is another record even with the same annotation and
// spec (restored from a manifest or a backup, say): a deletion is a change,
// which a write conditioned on the record before it loses, and whatever was
// written between the two is unknown.
func sameRecord(a, b *coordinationv1.Lease) bool {
	ra, oka := a.Annotations[RecordAnnotation]
	rb, okb := b.Annotations[RecordAnnotation]
	return a.UID == b.UID && oka == okb && ra == rb && apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// seen returns the Lease at resourceVersion rv if this Decider has it: as
// last read or written, as it last wrote it, or as its watch delivered it
// last (a candidate woken by a pushed release writes over that, without a
// GET on the hand-over's critical path). Nil otherwise. The result is
// shared: copy it to modify it.
func (d *Decider) seen(rv string) *coordinationv1.Lease {
	d.mu.Lock()
	last, written, w := d.last, d.written, d.w
	d.mu.Unlock()
	for _, l := range []*coordinationv1.Lease{last, written} {
		if l != nil && l.ResourceVersion == rv {
			return l
		}
	}
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease != nil && w.lease.ResourceVersion == rv {
		return w.lease
	}
	return nil
}

// token is the LeaderToken of l. CommitTime stays zero: the API server
// reports no commit time with sub-second precision (managedFields times
// are in whole seconds), and renewTime is the writer's clock, not the
// server's.
func token(l *coordinationv1.Lease) entry.LeaderToken {
	return entry.LeaderToken{Version: l.ResourceVersion}
}

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

// checkNames checks a namespace and Lease name as the API server would.
func checkNames(namespace, name string) error {
	if errs := apivalidation.ValidateNamespaceName(namespace, false); len(errs) > 0 {
		return fmt.Errorf("kube: namespace %q: %s", namespace, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("kube: Lease name %q: %s", name, errs[0])
	}
	return nil
}
