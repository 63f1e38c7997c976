//go:build tools

// Package kubeserver pins the commands scripts/kube-apiserver.sh builds.
package kubeserver

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
