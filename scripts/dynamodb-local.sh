#!/usr/bin/env bash
# dynamodb-local.sh installs and runs DynamoDB Local, AWS's emulator of
# DynamoDB, for the dynamodb backend's tests. Everything it makes stays in the
# repository's git-ignored .tmp/dynamodb-local/ (the emulator, a small
# launcher, log, pid file). DynamoDB Local is under AWS's licence
# (.tmp/dynamodb-local/package/emulator/LICENSE.txt): it is fetched at test
# time and never committed.
#
# Usage:
#   scripts/dynamodb-local.sh install   fetch DynamoDB Local into .tmp/dynamodb-local
#   scripts/dynamodb-local.sh start     install if needed, start it unless it is
#                                       already running, wait until it answers,
#                                       print the environment the tests read as
#                                       export lines
#   scripts/dynamodb-local.sh env       print those export lines
#   scripts/dynamodb-local.sh status    say whether it is running
#   scripts/dynamodb-local.sh stop      stop the server this script started
#
# A developer runs:
#   eval "$(scripts/dynamodb-local.sh start)"
#   cd dynamodb && go test ./...
#
# The jar comes from the npm package amplify-dynamodb-simulator, which ships
# it in emulator/ (DynamoDBLocal.jar and DynamoDBLocal_lib). Only that
# package's tarball is fetched (npm pack): npm install would also pull in its
# JavaScript wrapper's dependencies, which running the jar does not need.
#
# DynamoDB Local has no option for the address it listens on and would
# listen on every interface; a ten-line launcher (compiled here with javac)
# binds its server to 127.0.0.1 before starting it. It runs in memory with
# -sharedDb, so every client sees the same tables whatever credentials and
# region it signs with (the tests use fixed dummy keys), and
# -disableTelemetry. Needs Java 17 (java and javac).
#
# Settings (environment): DYNAMODB_LOCAL_PORT (default 8000; when it is not
# set and something this script did not start holds that port, start tries
# 8001 to 8009).
set -euo pipefail

PACKAGE=amplify-dynamodb-simulator
VERSION=2.9.30 # ships DynamoDB Local 1.25.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.tmp/dynamodb-local
EMULATOR=$STATE/package/emulator
CLASSES=$STATE/classes
PIDFILE=$STATE/pid
PORTFILE=$STATE/port
LOG=$STATE/log
LAUNCHER=LoopbackDynamoDBLocal

set_port() {
	PORT=$1
	ENDPOINT=http://127.0.0.1:$PORT
}
if [ -n "${DYNAMODB_LOCAL_PORT:-}" ]; then
	set_port "$DYNAMODB_LOCAL_PORT"
elif [ -s "$PORTFILE" ]; then
	set_port "$(cat "$PORTFILE")" # where this script last started it
else
	set_port 8000
fi

install() {
	if [ "$(cat "$STATE/version" 2>/dev/null)" = "$VERSION" ] && [ -f "$EMULATOR/DynamoDBLocal.jar" ] &&
		[ -f "$CLASSES/$LAUNCHER.class" ]; then
		return 0
	fi
	for tool in npm java javac; do
		if ! command -v "$tool" >/dev/null; then
			say "$tool not found: DynamoDB Local needs npm to fetch it and a Java 17 JDK to run it"
			return 1
		fi
	done
	say "fetching $PACKAGE@$VERSION (DynamoDB Local) into $STATE"
	rm -rf "$STATE/package" "$CLASSES" "$STATE/version"
	mkdir -p "$STATE"
	local tgz
	tgz=$(cd "$STATE" && npm pack --silent "$PACKAGE@$VERSION")
	tar -xzf "$STATE/$tgz" -C "$STATE"
	rm -f "$STATE/$tgz"
	if [ ! -f "$EMULATOR/DynamoDBLocal.jar" ]; then
		say "$PACKAGE@$VERSION has no emulator/DynamoDBLocal.jar"
		return 1
	fi
	mkdir -p "$CLASSES"
	cat >"$STATE/$LAUNCHER.java" <<'EOF'
import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import org.eclipse.jetty.server.AbstractNetworkConnector;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;

// Starts DynamoDB Local as its own main does, but listening on 127.0.0.1 only.
public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        java.lang.reflect.Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Connector[] connectors = ((Server) f.get(proxy)).getConnectors();
        if (connectors.length == 0) throw new IllegalStateException("DynamoDB Local has no connector to bind");
        for (Connector c : connectors) ((AbstractNetworkConnector) c).setHost("127.0.0.1");
        proxy.start();
        proxy.join();
    }
}
EOF
	javac -nowarn -d "$CLASSES" -cp "$EMULATOR/DynamoDBLocal.jar:$EMULATOR/DynamoDBLocal_lib/*" "$STATE/$LAUNCHER.java" >&2
	echo "$VERSION" >"$STATE/version"
}

answers() {
	# Any HTTP answer (an unsigned request gets 400) means it is up.
	curl -s -o /dev/null --max-time 2 "$ENDPOINT/"
}

print_env() {
	echo "export LEADERELECTION_DYNAMODB_ENDPOINT=$ENDPOINT"
}

start() {
	install
	if pid=$(running_pid); then
		if answers; then
			say "already running (pid $pid) at $ENDPOINT"
			print_env
			return 0
		fi
	elif answers; then
		if [ -n "${DYNAMODB_LOCAL_PORT:-}" ]; then
			say "something not started by this script already answers at $ENDPOINT; stop it or set another DYNAMODB_LOCAL_PORT"
			return 1
		fi
		local port found=
		for port in 8000 8001 8002 8003 8004 8005 8006 8007 8008 8009; do
			set_port "$port"
			if ! answers; then
				found=1
				break
			fi
		done
		if [ -z "$found" ]; then
			say "ports 8000-8009 on 127.0.0.1 are all taken; set DYNAMODB_LOCAL_PORT"
			return 1
		fi
	fi
	echo "$PORT" >"$PORTFILE"
	(cd "$EMULATOR" && spawn "$PIDFILE" java -Djava.library.path=./DynamoDBLocal_lib \
		-cp "$CLASSES:DynamoDBLocal.jar:DynamoDBLocal_lib/*" "$LAUNCHER" \
		-inMemory -sharedDb -disableTelemetry -port "$PORT" >"$LOG" 2>&1 </dev/null)
	# The JVM takes several seconds to start on a busy machine.
	await_started 300 0.2
}

NAME=dynamodb-local
MATCH="$LAUNCHER"
STATE_FILES="$PORTFILE"
. "$ROOT/scripts/lib.sh"
main "$@"
