package dynamodb_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	leaderelection "github.com/racedecider/leaderelection"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
)

var _ leaderelection.RaceDecider = (*ledynamodb.Decider)(nil)

func TestNewDeciderValidates(t *testing.T) {
	c := ddb.New(ddb.Options{Region: "us-east-1"})
	cases := []struct {
		name       string
		client     *ddb.Client
		table, key string
		opts       []ledynamodb.Option
		want       []string
	}{
		{"empty table", c, "", "k", nil, []string{`table ""`}},
		{"short table", c, "ab", "k", nil, []string{`table "ab"`}},
		{"slash in table", c, "a/b", "k", nil, []string{`table "a/b"`}},
		{"empty key", c, "elections", "", nil, []string{`key ""`}},
		{"long key", c, "elections", strings.Repeat("k", 2049), nil, []string{"1 to 2048 bytes"}},
		{"table and key", c, "", "", nil, []string{`table ""`, `key ""`}},
		{"nil client", nil, "elections", "k", nil, []string{"client is nil"}},
		{"key attribute clash", c, "elections", "k", []ledynamodb.Option{ledynamodb.WithKeyAttribute("version")}, []string{`key attribute "version"`}},
		{"sort key without attribute", c, "elections", "k", []ledynamodb.Option{ledynamodb.WithSortKey("", "x")}, []string{`sort key attribute ""`}},
		{"empty sort key", c, "elections", "k", []ledynamodb.Option{ledynamodb.WithSortKey("sk", "")}, []string{`sort key ""`}},
		{"negative timeout", c, "elections", "k", []ledynamodb.Option{ledynamodb.WithTimeout(-time.Second)}, []string{"timeout -1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ledynamodb.NewDecider(tc.client, tc.table, tc.key, tc.opts...)
			if err == nil {
				t.Fatalf("NewDecider(%q, %q) = %v, nil; want an error", tc.table, tc.key, d)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	d, err := ledynamodb.NewDecider(c, "elections", "jobs/report")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "dynamodb://elections/jobs/report" {
		t.Errorf("String() = %q", got)
	}
	d, err = ledynamodb.NewDecider(c, "elections", "app", ledynamodb.WithSortKey("sk", "election#report"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "dynamodb://elections/app (sk=election#report)" {
		t.Errorf("String() with a sort key = %q", got)
	}
}

// TestNonUTF8KeysRefused checks that a key that is not UTF-8 is refused:
// the SDK's JSON encoding replaces each invalid byte with U+FFFD, so that two
// such keys (and the key spelling out U+FFFD) would name one item, and two
// elections would share one record.
func TestNonUTF8KeysRefused(t *testing.T) {
	s := newStore(t)
	k := newKey()
	keys := []string{k + "\xff", k + "\xfe"}
	var ds []*ledynamodb.Decider
	for _, key := range keys {
		d, err := ledynamodb.NewDecider(s.c, s.table, key)
		if err == nil {
			ds = append(ds, d)
			continue
		}
		if !strings.Contains(err.Error(), "not valid UTF-8") || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("NewDecider(%q): error %q does not say the key is not UTF-8", key, err)
		}
	}
	if len(ds) == 2 {
		if _, err := ds[0].WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w1"}); err != nil {
			t.Fatal(err)
		}
		rec, err := ds[1].ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if rec.ElectionNumber != entry.NoElections {
			t.Errorf("the election %q reads the record written for %q (%+v): both keys name one item", keys[1], keys[0], rec)
		}
		t.Errorf("NewDecider accepted keys that are not UTF-8")
	}
	c := ddb.New(ddb.Options{Region: "us-east-1"})
	for _, opts := range [][]ledynamodb.Option{
		{ledynamodb.WithSortKey("sk", "x\xff")},
		{ledynamodb.WithSortKey("s\xffk", "x")},
		{ledynamodb.WithKeyAttribute("p\xffk")},
	} {
		if d, err := ledynamodb.NewDecider(c, "elections", "k", opts...); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("NewDecider with a sort key or attribute that is not UTF-8 = %v, %v; want an error saying so", d, err)
		}
	}
}

// TestConformance runs the conformance suite with 50 writers sharing one
// client racing on one version for 20 rounds.
func TestConformance(t *testing.T) {
	defer func(c, r int) { racedecidertest.Concurrency, racedecidertest.Rounds = c, r }(racedecidertest.Concurrency, racedecidertest.Rounds)
	racedecidertest.Concurrency, racedecidertest.Rounds = 50, 20
	s := newStore(t)
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		d, _ := s.decider(t, nil)
		return d
	})
}

// TestRaceWritersSeparateClients races 50 writers, each with a client (and
// connections) of its own, on one item.
func TestRaceWritersSeparateClients(t *testing.T) {
	s := newStore(t)
	key := newKey()
	ds := make([]leaderelection.RaceDecider, 50)
	for i := range ds {
		d, err := ledynamodb.NewDecider(newClient(t, s.endpoint), s.table, key)
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	racedecidertest.RaceWriters(t, ds, 10)
}

// TestSortKey runs the conformance suite on a table whose key schema has a
// sort key, with many elections under one partition key.
func TestSortKey(t *testing.T) {
	s := newStore(t) // for the endpoint and cleanup of its own table
	table := s.table + "-sk"
	_, err := s.c.CreateTable(t.Context(), &ddb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.c.DeleteTable(t.Context(), &ddb.DeleteTableInput{TableName: aws.String(table)}) })
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		d, err := ledynamodb.NewDecider(s.c, table, "app", ledynamodb.WithKeyAttribute("PK"), ledynamodb.WithSortKey("SK", newKey()))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestCorruptRecords(t *testing.T) {
	s := newStore(t)
	d, key := s.decider(t, nil)
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
		s.rawPut(t, key, recordAttrs(data, 1, "w"))
	}, s.name(key))

	valid, err := entry.Marshal(&entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a", WriteID: "w-1"})
	if err != nil {
		t.Fatal(err)
	}
	without := func(attr string) map[string]types.AttributeValue {
		a := recordAttrs(valid, 1, "w-1")
		delete(a, attr)
		return a
	}
	with := func(attr string, v types.AttributeValue) map[string]types.AttributeValue {
		a := recordAttrs(valid, 1, "w-1")
		a[attr] = v
		return a
	}
	items := map[string]map[string]types.AttributeValue{
		"no record":          without("record"),
		"record as a string": with("record", &types.AttributeValueMemberS{Value: string(valid)}),
		"no version":         without("version"),
		"version as string":  with("version", &types.AttributeValueMemberS{Value: "1"}),
		"fractional version": with("version", &types.AttributeValueMemberN{Value: "1.5"}),
		"zero version":       with("version", &types.AttributeValueMemberN{Value: "0"}),
		"no write id":        without("write_id"),
		"other write id":     with("write_id", &types.AttributeValueMemberS{Value: "w-2"}),
	}
	for name, attrs := range items {
		t.Run(name, func(t *testing.T) {
			s.rawPut(t, key, attrs)
			e, err := d.ReadCurrent(t.Context())
			if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), s.name(key)) {
				t.Fatalf("ReadCurrent = %+v, %v; want entry.ErrCorruptRecord naming %s", e, err, s.name(key))
			}
		})
	}
}

// TestMissingTable: a missing table is a refusal naming the table, neither
// an empty election nor a lost race.
func TestMissingTable(t *testing.T) {
	s := newStore(t)
	table := "no-such-table-" + runID
	d, err := ledynamodb.NewDecider(s.c, table, "k")
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "dynamodb://"+table+"/k") {
		t.Fatalf("read from a missing table = %+v, %v; want entry.ErrRefused naming the item", e, err)
	}
	t.Logf("read: %v", err)
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
	if !errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), table) {
		t.Fatalf("create in a missing table: err = %v, want entry.ErrRefused naming the table", err)
	}
}

// TestWrongKeyAttribute: a Decider whose key attribute is not the table's
// gets DynamoDB's ValidationException, a refusal.
func TestWrongKeyAttribute(t *testing.T) {
	s := newStore(t)
	d, err := ledynamodb.NewDecider(s.c, s.table, "k", ledynamodb.WithKeyAttribute("id"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) {
		t.Fatalf("read with the wrong key attribute: err = %v, want entry.ErrRefused", err)
	}
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
	if !errors.Is(err, entry.ErrRefused) {
		t.Fatalf("write with the wrong key attribute: err = %v, want entry.ErrRefused", err)
	}
	t.Logf("write: %v", err)
}

// TestRecreatedItem: an item deleted by hand and created again starts at
// version 1 again; a writer still holding version 1 of the deleted item
// must lose all the same, which the write id in the condition ensures.
func TestRecreatedItem(t *testing.T) {
	s := newStore(t)
	d, key := s.decider(t, nil)
	ctx := t.Context()
	old, err := d.WriteEntry(ctx, &entry.RaceEntry{ElectionNumber: 0, LeaderID: "a", WriteID: "w-old"})
	if err != nil {
		t.Fatal(err)
	}
	s.rawDelete(t, key)
	if e, err := d.ReadCurrent(ctx); err != nil || e.ElectionNumber != entry.NoElections {
		t.Fatalf("read after delete = %+v, %v; want no elections", e, err)
	}
	cur, err := d.WriteEntry(ctx, &entry.RaceEntry{ElectionNumber: 0, LeaderID: "b", WriteID: "w-new"})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version == old.Version {
		t.Fatalf("the recreated item has the deleted one's token %q", old.Version)
	}
	_, err = d.WriteEntry(ctx, &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-stale", Token: old})
	if !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("write on the deleted item's token: err = %v, want entry.ErrRaceLost", err)
	}
	if e, err := d.ReadCurrent(ctx); err != nil || e.WriteID != "w-new" {
		t.Fatalf("read = %+v, %v; want w-new untouched", e, err)
	}
}

func TestDeleted(t *testing.T) {
	s := newStore(t)
	d, key := s.decider(t, nil)
	racedecidertest.CheckDeleted(t, d, func(t *testing.T) { s.rawDelete(t, key) })
}

// TestTokens: a write's token is what the next read reports, and carries
// the store's clock; a read's has no commit time.
func TestTokens(t *testing.T) {
	s := newStore(t)
	d, _ := s.decider(t, nil)
	before := time.Now().Add(-time.Minute)
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Token.SameVersion(tok) {
		t.Errorf("read token %q, write returned %q", got.Token.Version, tok.Version)
	}
	if ct := tok.CommitTime; ct.Before(before) || ct.After(time.Now().Add(time.Minute)) {
		t.Errorf("write token CommitTime %v is not about now", ct)
	}
	if !got.Token.CommitTime.IsZero() {
		t.Errorf("read token CommitTime %v, want zero", got.Token.CommitTime)
	}
	// A token from another backend is an error, not a lost race.
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, WriteID: "w-1", Token: entry.LeaderToken{Version: `"etag"`}})
	if err == nil || errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), "not made by this backend") {
		t.Errorf("write on a foreign token: err = %v", err)
	}
	if _, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Token: tok}); err == nil || !strings.Contains(err.Error(), "WriteID") {
		t.Errorf("write without a write id: err = %v", err)
	}
}
