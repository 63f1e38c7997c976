package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/kube"
)

// TestNarrowRole: the README's Role narrowed to the one Lease, by
// resourceNames on every verb but create (which RBAC cannot narrow by name),
// is all a candidate needs: it reads, creates, watches (a list and a watch
// with a field selector on the name, which RBAC requires for a narrowed
// list or watch) and updates the Lease, and is refused any other. It runs
// as the test server's user "nobody", in a namespace of its own.
func TestNarrowRole(t *testing.T) {
	admin := clientset(t, adminConfig(t))
	nobody := restConfig(t, envKubeconfigNobody)
	ns, lease := freshLease(), freshLease()
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Left Terminating: the test server runs no namespace controller.
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	leases := []string{"coordination.k8s.io"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leader-election", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: leases, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "update"}, ResourceNames: []string{lease}},
		{APIGroups: leases, Resources: []string{"leases"}, Verbs: []string{"create"}},
	}}
	if _, err := admin.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leader-election", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "nobody"}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := kube.NewDeciderForConfig(nobody, ns, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The authorizer learns of the binding from its informers, shortly.
	var e *entry.RaceEntry
	for start := time.Now(); ; {
		if e, err = d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || e.ElectionNumber != entry.NoElections {
		t.Fatalf("ReadCurrent with the narrow Role = %+v, %v; want no record", e, err)
	}
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w0", TermExpiry: time.Now().Add(time.Minute), Token: e.Token})
	if err != nil {
		t.Fatalf("creating the Lease with the narrow Role: %v", err)
	}
	done := waitAsync(t, d, tok, "WaitForChange with the narrow Role")
	if _, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w1", TermExpiry: time.Now().Add(time.Minute), Token: tok}); err != nil {
		t.Fatalf("updating the Lease with the narrow Role: %v", err)
	}
	select {
	case e := <-done:
		if e == nil || e.WriteID != "w1" {
			t.Fatalf("WaitForChange with the narrow Role returned %+v, want w1", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForChange with the narrow Role did not see the update within 10 s")
	}

	other, err := kube.NewDeciderForConfig(nobody, ns, freshLease())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) {
		t.Fatalf("ReadCurrent of another Lease with the narrow Role = %v; want a refusal", err)
	}
}
