#!/usr/bin/env bash
# kube-apiserver.sh builds and runs a real kube-apiserver backed by a real
# etcd, for the kube backend's tests. Both are built from Go modules by the
# tools module tools/kubeserver (not in go.work, so the Kubernetes modules never
# enter the library's dependency graph). Everything it makes stays in the
# repository's git-ignored .bin/ (binaries) and .tmp/kube-apiserver/ (etcd
# data, certificates, token file, kubeconfig, logs, pid files).
#
# Usage:
#   scripts/kube-apiserver.sh install   build etcd and kube-apiserver into .bin/
#                                       (a cold build takes 10-15 minutes and
#                                       about 2.5 GB of memory; rebuilt only when
#                                       the version in tools/kubeserver changes)
#   scripts/kube-apiserver.sh start     install if needed, start etcd and the
#                                       API server on free loopback ports unless
#                                       they already run, wait until the API
#                                       server is ready, print export lines
#   scripts/kube-apiserver.sh env       print those export lines
#   scripts/kube-apiserver.sh status    say whether it is running
#   scripts/kube-apiserver.sh stop      stop what this script started
#
# A developer runs:
#   eval "$(scripts/kube-apiserver.sh start)"
#   (cd kube && go test ./...)
#
# The API server authenticates with a static token file (anonymous requests
# get 401) and authorizes with RBAC. Two users exist: "admin" (group
# system:masters, may do anything) and "nobody" (no rights at all, for the
# forbidden tests). Their kubeconfigs are printed as LEADERELECTION_KUBECONFIG
# and LEADERELECTION_KUBECONFIG_NOBODY.
#
# A second API server on the same etcd serves Leases without a watch cache
# (--watch-cache-sizes), so that its Lease watches read etcd directly: once
# etcd is compacted (its client URL is printed as LEADERELECTION_KUBE_ETCD),
# a watch from an older resourceVersion ends with 410 Gone. The first one's
# watch cache keeps at least 75 s of history (up to 100k events), so a test
# cannot make it answer 410 in seconds. The admin's kubeconfig for the second
# is printed as LEADERELECTION_KUBECONFIG_NOCACHE; KUBE_APISERVER_NOCACHE=0
# leaves it out.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools/kubeserver
BINDIR=$ROOT/.bin
APISERVER=$BINDIR/kube-apiserver
ETCD=$BINDIR/etcd
STATE=$ROOT/.tmp/kube-apiserver
KUBECONFIG_ADMIN=$STATE/kubeconfig
KUBECONFIG_NOBODY=$STATE/kubeconfig-nobody
KUBECONFIG_NOCACHE=$STATE/kubeconfig-nocache
NOCACHE=${KUBE_APISERVER_NOCACHE:-1}

NAME=kube-apiserver
# lib.sh's spawn, spawned_alive and give_up; this script's own functions
# below replace the rest.
. "$ROOT/scripts/lib.sh"

say() { echo "kube-apiserver.sh: $*" >&2; }

# wanted_version prints the k8s.io/kubernetes and etcd versions tools/kubeserver
# pins; the binaries are rebuilt when they were built from others.
wanted_version() {
	awk '$1 == "k8s.io/kubernetes" || $1 == "go.etcd.io/etcd/server/v3" { print $1 "@" $2 }' "$TOOLS/go.mod" | sort | tr '\n' ' '
}

built_version() {
	local b
	for b in "$APISERVER" "$ETCD"; do
		[ -x "$b" ] || return 0
	done
	{
		go version -m "$APISERVER" 2>/dev/null | awk '($1 == "mod" || $1 == "dep") && $2 == "k8s.io/kubernetes" { print $2 "@" $3 }'
		go version -m "$ETCD" 2>/dev/null | awk '($1 == "mod" || $1 == "dep") && $2 == "go.etcd.io/etcd/server/v3" { print $2 "@" $3 }'
	} | sort -u | tr '\n' ' '
}

install() {
	if [ "$(built_version)" = "$(wanted_version)" ]; then
		return 0
	fi
	say "building $(wanted_version)into $BINDIR (a cold build takes 10-15 minutes)"
	mkdir -p "$BINDIR"
	# The go lines of these modules must be satisfied by the local toolchain:
	# no other toolchain can be downloaded here.
	if ! (cd "$TOOLS" && GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod \
		go build -trimpath -o "$ETCD.new" go.etcd.io/etcd/server/v3 >&2 &&
		cd "$TOOLS" && GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod \
		go build -trimpath -o "$APISERVER.new" k8s.io/kubernetes/cmd/kube-apiserver >&2); then
		say "go build failed (this is $(go env GOVERSION))"
		return 1
	fi
	mv "$ETCD.new" "$ETCD"
	mv "$APISERVER.new" "$APISERVER"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

alive() { # alive NAME [PROGRAM]: the pid of NAME if this script started it and it runs PROGRAM (default: NAME)
	local f=$STATE/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "${2:-$1}"; then
		echo "$pid"
		return 0
	fi
	return 1
}

api_ready() { # api_ready [ADDR_FILE]: the API server at the address in ADDR_FILE (default: the main one's) is ready
	local f=$STATE/${1:-apiserver.addr}
	[ -s "$f" ] || return 1
	curl -s --max-time 2 --cacert "$STATE/ca.crt" -H "Authorization: Bearer $(cat "$STATE/admin.token")" \
		"https://$(cat "$f")/readyz" 2>/dev/null | grep -qx ok
}

# nocache_up: the second API server runs and is ready, or is not wanted.
nocache_up() {
	[ "$NOCACHE" = 0 ] || { alive kube-apiserver-nocache kube-apiserver >/dev/null && api_ready apiserver-nocache.addr; }
}

etcd_ready() {
	[ -s "$STATE/etcd.addr" ] || return 1
	curl -s --max-time 2 "http://$(cat "$STATE/etcd.addr")/health" 2>/dev/null | grep -q '"health":"true"'
}

print_env() {
	cat <<EOF
export LEADERELECTION_KUBECONFIG=$KUBECONFIG_ADMIN
export LEADERELECTION_KUBECONFIG_NOBODY=$KUBECONFIG_NOBODY
EOF
	if [ -s "$STATE/etcd.addr" ]; then
		echo "export LEADERELECTION_KUBE_ETCD=http://$(cat "$STATE/etcd.addr")"
	fi
	if [ "$NOCACHE" != 0 ] && [ -s "$STATE/apiserver-nocache.addr" ]; then
		echo "export LEADERELECTION_KUBECONFIG_NOCACHE=$KUBECONFIG_NOCACHE"
	fi
}

make_credentials() {
	mkdir -p "$STATE"
	if [ ! -s "$STATE/ca.crt" ]; then
		# One self-signed certificate serves as both the CA the clients trust
		# and the API server's serving certificate.
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=leaderelection-test-apiserver" \
			-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
			-keyout "$STATE/ca.key" -out "$STATE/ca.crt" 2>/dev/null
	fi
	if [ ! -s "$STATE/sa.key" ]; then
		openssl genrsa -out "$STATE/sa.key" 2048 2>/dev/null
		openssl rsa -in "$STATE/sa.key" -pubout -out "$STATE/sa.pub" 2>/dev/null
	fi
	if [ ! -s "$STATE/admin.token" ]; then
		openssl rand -hex 16 >"$STATE/admin.token"
		openssl rand -hex 16 >"$STATE/nobody.token"
	fi
	cat >"$STATE/tokens.csv" <<EOF
$(cat "$STATE/admin.token"),admin,admin-uid,"system:masters"
$(cat "$STATE/nobody.token"),nobody,nobody-uid
EOF
}

write_kubeconfig() { # write_kubeconfig FILE USER TOKEN [ADDR_FILE]
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://$(cat "$STATE/${4:-apiserver.addr}")
    certificate-authority: $STATE/ca.crt
users:
- name: $2
  user:
    token: $3
contexts:
- name: test
  context:
    cluster: test
    user: $2
    namespace: default
current-context: test
EOF
}

# launch_apiserver NAME ADDR_FILE CERT_DIR [FLAG...] starts an API server on
# the running etcd, on a free loopback port, with the pid in NAME.pid and its
# log in NAME.log.
launch_apiserver() {
	local name=$1 addr=$2 certs=$3 port
	shift 3
	port=$(free_port)
	echo "127.0.0.1:$port" >"$STATE/$addr"
	mkdir -p "$STATE/$certs"
	spawn "$STATE/$name.pid" "$APISERVER" \
		--etcd-servers "http://$(cat "$STATE/etcd.addr")" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
		--tls-cert-file "$STATE/ca.crt" --tls-private-key-file "$STATE/ca.key" --cert-dir "$STATE/$certs" \
		--client-ca-file "$STATE/ca.crt" \
		--token-auth-file "$STATE/tokens.csv" --anonymous-auth=false \
		--authorization-mode "${KUBE_AUTHORIZATION_MODE:-RBAC}" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$STATE/sa.pub" \
		--service-account-signing-key-file "$STATE/sa.key" \
		--service-cluster-ip-range 10.0.0.0/24 \
		--profiling=false \
		"$@" \
		>"$STATE/$name.log" 2>&1 </dev/null
}

# await_apiserver NAME ADDR_FILE waits until the API server is ready; if it
# is not within a minute, it shows its log and stops everything.
await_apiserver() {
	for _ in $(seq 1 600); do
		api_ready "$2" && return 0
		spawned_alive "$STATE/$1.pid" >/dev/null || break
		sleep 0.1
	done
	give_up "$STATE/$1.pid" "$STATE/$1.log" "$1"
	stop >/dev/null 2>&1 || true
	return 1
}

# start_nocache starts the second API server, whose Lease watches bypass the
# watch cache, and waits until it is ready.
start_nocache() {
	[ "$NOCACHE" != 0 ] || return 0
	stop_one kube-apiserver-nocache kube-apiserver >/dev/null 2>&1 || true
	# Its identity would be the first one's (a hash of the host name): the
	# two would fight over one identity Lease in kube-system.
	launch_apiserver kube-apiserver-nocache apiserver-nocache.addr certs-nocache \
		--watch-cache-sizes leases.coordination.k8s.io#0 --feature-gates APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false
	write_kubeconfig "$KUBECONFIG_NOCACHE" admin "$(cat "$STATE/admin.token")" apiserver-nocache.addr
	await_apiserver kube-apiserver-nocache apiserver-nocache.addr
	say "started the second kube-apiserver (no Lease watch cache) at https://$(cat "$STATE/apiserver-nocache.addr")"
}

start() {
	install
	make_credentials
	if alive kube-apiserver >/dev/null && api_ready && alive etcd >/dev/null; then
		if ! nocache_up; then
			start_nocache
		fi
		say "running at https://$(cat "$STATE/apiserver.addr")"
		print_env
		return 0
	fi
	stop >/dev/null 2>&1 || true
	mkdir -p "$STATE"
	local cport pport
	cport=$(free_port)
	pport=$(free_port)
	echo "127.0.0.1:$cport" >"$STATE/etcd.addr"
	rm -rf "$STATE/etcd-data"
	# --unsafe-no-fsync: the data is throwaway and fsync dominates test time.
	spawn "$STATE/etcd.pid" "$ETCD" --name test --data-dir "$STATE/etcd-data" \
		--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "test=http://127.0.0.1:$pport" --unsafe-no-fsync \
		>"$STATE/etcd.log" 2>&1 </dev/null
	for _ in $(seq 1 100); do
		etcd_ready && break
		spawned_alive "$STATE/etcd.pid" >/dev/null || break
		sleep 0.1
	done
	if ! etcd_ready; then
		give_up "$STATE/etcd.pid" "$STATE/etcd.log" etcd
		stop >/dev/null 2>&1 || true
		return 1
	fi
	launch_apiserver kube-apiserver apiserver.addr certs
	write_kubeconfig "$KUBECONFIG_ADMIN" admin "$(cat "$STATE/admin.token")"
	write_kubeconfig "$KUBECONFIG_NOBODY" nobody "$(cat "$STATE/nobody.token")"
	await_apiserver kube-apiserver apiserver.addr
	say "started kube-apiserver at https://$(cat "$STATE/apiserver.addr") (etcd at $(cat "$STATE/etcd.addr")), logs in $STATE"
	# The second starts once the first has written the cluster's initial
	# objects (RBAC roles, namespaces), which it then only reads.
	start_nocache
	print_env
}

stop_one() { # stop_one NAME [PROGRAM]
	local pid
	if pid=$(alive "$1" "${2:-$1}"); then
		kill "$pid"
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		say "stopped $1 (pid $pid)"
	fi
	rm -f "$STATE/$1.pid"
}

stop() {
	stop_one kube-apiserver-nocache kube-apiserver
	stop_one kube-apiserver
	stop_one etcd
	rm -f "$STATE/apiserver.addr" "$STATE/apiserver-nocache.addr" "$STATE/etcd.addr"
}

status() {
	if alive kube-apiserver >/dev/null && api_ready; then
		say "running at https://$(cat "$STATE/apiserver.addr")"
		if [ "$NOCACHE" != 0 ] && ! nocache_up; then
			say "but not the second API server (no Lease watch cache): start starts it"
			return 1
		fi
	else
		say "not running"
		return 1
	fi
}

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
