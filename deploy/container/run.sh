#!/usr/bin/env bash
# run.sh - run the exporter's container with the privileges it needs and no
# more (deploy/README.md "Privileges" says why each one).
#
#   deploy/container/run.sh [EXPORTER OPTIONS]     e.g. --listen 10.0.0.5:9929
#
# Default: serves http://127.0.0.1:9929/metrics (the host's network; pass
# --listen ADDR:PORT for another address). Environment: IMAGE
# (localhost/osdstage-exporter:latest), NAME (osdstage-exporter), PODMAN_ARGS
# (more podman run options, e.g. "--rm -it" instead of "-d").
#
# Checked on a Ceph lab (tests/cluster/test_exporter_container.py):
# with any one of these taken away the exporter cannot trace.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=${IMAGE:-localhost/osdstage-exporter:latest}
NAME=${NAME:-osdstage-exporter}

# podman's own default limits can exceed the caller's hard limits (runc then
# refuses to start): at most the caller's
nofile=$(ulimit -Hn); [[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768

(($#)) || set -- --listen 127.0.0.1:9929

# shellcheck disable=SC2086
exec podman run ${PODMAN_ARGS:--d} --name "$NAME" \
    --pid=host \
    --network=host \
    --cap-drop=all \
    --cap-add=CAP_BPF,CAP_PERFMON,CAP_SYS_PTRACE \
    --security-opt seccomp="$HERE/seccomp.json" \
    --volume /sys/kernel/tracing:/sys/kernel/tracing:ro \
    --read-only \
    --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
    ${PODMAN_RUNTIME:+--runtime "$PODMAN_RUNTIME"} \
    "$IMAGE" "$@"
