#!/usr/bin/env bash
# jaeger.sh - a real Jaeger (all-in-one, v2: cmd/jaeger 1.75.0) on 127.0.0.1 for
# osdstage's OTLP traces: OTLP/HTTP on :4318 (gRPC :4317), the query API on :16686
# (/api/traces/ID, /api/v3/traces/ID), health on :13133. In-memory storage
# (vagrant/jaeger.yaml). The UI's files are not part of the Go module: :16686 serves
# the APIs and a placeholder page.
#
# Subcommands:
#   build   build the binary from its Go module when missing (the Go toolchain on
#           PATH or in /usr/local/go; modules from the Go module proxy): a module of
#           our own requiring cmd/jaeger as a tool, with Jaeger's own replace
#           directive; cached in $JAEGER_CACHE (default /var/cache/osdstage/jaeger):
#           ~2 min of downloads and ~5-7 min of build on 2 cores the first time,
#           nothing after
#   up      build if needed, start it (or leave it running) and wait until healthy
#   down    stop it
#   env     print "export OTLP_URL=... JAEGER_API=..."
#   pid     print the running Jaeger's pid (exit status 1 when none runs)
set -euo pipefail

VER=1.75.0
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${JAEGER_CACHE:-/var/cache/osdstage/jaeger}
BIN=$CACHE/jaeger-$VER
SRC=$CACHE/src
PIDFILE=$CACHE/jaeger.pid
LOG=$CACHE/jaeger.log
export GOPATH=$CACHE/go GOMODCACHE=$CACHE/go/pkg/mod GOCACHE=$CACHE/go/cache
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export PATH=$PATH:/usr/local/go/bin

say() { echo "jaeger.sh: $*" >&2; }
die() { say "$*"; exit 1; }

build() {
    [ -x "$BIN" ] && return 0
    command -v go > /dev/null || die "no Go toolchain (go on PATH or /usr/local/go/bin): \
it builds Jaeger $VER from its module"
    mkdir -p "$SRC"
    cd "$SRC"
    if [ ! -f go.mod ]; then
        go mod init osdstage.local/jaeger > /dev/null 2>&1
        # Jaeger's own go.mod replaces sarama: its build links that version
        go mod edit -replace=github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0
    fi
    local t0=$SECONDS
    if ! grep -q 'jaegertracing/jaeger/cmd/jaeger' go.mod; then
        say "fetching Jaeger $VER's modules (once)"
        go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@v$VER" > "$CACHE/build.log" 2>&1 ||
            { tail -5 "$CACHE/build.log" >&2; die "go get of Jaeger $VER failed (all of it: $CACHE/build.log)"; }
    fi
    say "building Jaeger $VER (once; a few minutes)"
    go build -trimpath -ldflags="-s -w" -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger \
        >> "$CACHE/build.log" 2>&1 ||
        { tail -5 "$CACHE/build.log" >&2; die "building Jaeger $VER failed (all of it: $CACHE/build.log)"; }
    mv "$BIN.tmp" "$BIN"
    say "built $BIN in $((SECONDS - t0)) s"
}

healthy() { curl -sf -o /dev/null http://127.0.0.1:13133/status; }

up() {
    build
    if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2> /dev/null && healthy; then
        return 0
    fi
    "$BIN" --config="$HERE/jaeger.yaml" > "$LOG" 2>&1 &
    echo $! > "$PIDFILE"
    for _ in $(seq 1 100); do
        healthy && return 0
        kill -0 "$(cat "$PIDFILE")" 2> /dev/null || { tail -5 "$LOG" >&2; die "Jaeger exited (log: $LOG)"; }
        sleep 0.1
    done
    die "Jaeger not healthy after 10 s (log: $LOG)"
}

down() {
    [ -f "$PIDFILE" ] || return 0
    local pid
    pid=$(cat "$PIDFILE")
    if kill -0 "$pid" 2> /dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    fi
    rm -f "$PIDFILE"
}

case "${1:-}" in
    build) mkdir -p "$CACHE"; build ;;
    up) mkdir -p "$CACHE"; up ;;
    down) down ;;
    env) echo "export OTLP_URL=http://127.0.0.1:4318 JAEGER_API=http://127.0.0.1:16686" ;;
    pid) [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2> /dev/null && cat "$PIDFILE" ;;
    *) echo "usage: $0 build|up|down|env|pid" >&2; exit 2 ;;
esac
