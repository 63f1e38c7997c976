package gcs_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/racedecider/leaderelection/entry"
)

// TestWriteWithoutGeneration: an upload that the store applies but whose
// answer reports no generation. WriteEntry must not return a token ("0")
// that no later write can be conditioned on: it reports an unknown outcome,
// which is neither a lost race nor a refusal (the write was applied), after
// one attempt (a retry would lose to the write itself). Reading back, as the
// engine does, finds the write and its generation, and the next write
// conditioned on it succeeds.
func TestWriteWithoutGeneration(t *testing.T) {
	var uploads, stripped atomic.Int64
	em := newEmulatorBehind(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/upload/") {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			var obj map[string]any
			// Only the first upload's answer loses its generation.
			if uploads.Add(1) == 1 && rec.Code == http.StatusOK && json.Unmarshal(body, &obj) == nil {
				if _, ok := obj["generation"]; ok {
					delete(obj, "generation")
					stripped.Add(1)
				}
				body, _ = json.Marshal(obj)
			}
			for k, v := range rec.Header() {
				if k != "Content-Length" {
					w.Header()[k] = v
				}
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
		})
	})
	object := freshObject(t)
	d := newDecider(t, newClient(t, em.addr), object)
	direct := newDecider(t, newClient(t, em.addr), object)

	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
	if stripped.Load() != 1 {
		t.Fatalf("%d upload answers had a generation to strip, want 1", stripped.Load())
	}
	switch {
	case err == nil:
		t.Fatalf("WriteEntry answered without a generation: token %q, want an error of unknown outcome", tok.Version)
	case errors.Is(err, entry.ErrRaceLost), errors.Is(err, entry.ErrRefused), errors.Is(err, entry.ErrThrottled):
		t.Fatalf("WriteEntry answered without a generation: %v; want an unknown outcome (the write was applied)", err)
	case !strings.Contains(err.Error(), "generation"):
		t.Errorf("WriteEntry: %v; want it to say the generation is missing", err)
	}
	t.Logf("write: %v", err)
	if n := uploads.Load(); n != 1 {
		t.Errorf("%d uploads, want 1 (a retry would lose to the applied write)", n)
	}

	// Reading back, as the engine does after an unknown outcome.
	cur, err := direct.ReadCurrent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cur.WriteID != "w-0" || cur.Token.Version == "" || cur.Token.Version == "0" {
		t.Fatalf("read back %+v (token %q), want write w-0 with its generation", cur, cur.Token.Version)
	}
	if _, err := direct.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1", Token: cur.Token}); err != nil {
		t.Fatalf("write conditioned on the generation read back: %v", err)
	}
}
