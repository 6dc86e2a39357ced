#!/usr/bin/env bash
# build-image.sh - build the exporter's image without pulling anything.
#
#   deploy/container/build-image.sh [IMAGE]     (default localhost/osdstage-exporter:latest)
#
# deploy/container/Containerfile starts FROM debian:bookworm. Where that
# cannot be pulled (a host without a registry), the base is made locally,
# as vagrant/container.sh makes the Ceph lab images: mmdebstrap builds a
# minimal Debian bookworm root filesystem from the host's own Debian mirror,
# `podman import` turns it into localhost/osdstage-debian:bookworm, and
# `podman build --from` uses it in place of the FROM line. The Containerfile's
# own steps then run unchanged (apt-get from the same mirror).
#
# Needs root, podman, runc, mmdebstrap, and the built BPF objects (make build).
# Silent when it works; the image is rebuilt when it is missing, when a file
# it copies (lib/, the exporter, build/) changed (a hash of them is its label
# osdstage.sources), or REBUILD=1. The root filesystem is cached in
# OSDSTAGE_ROOTFS_DIR (/var/cache/osdstage/rootfs/bookworm.tar).
# OSDSTAGE_MIRROR: the Debian mirror (default: the host's, from apt). Logs:
# LAB_LOG_ROOT (/var/log/osdstage).
set -euo pipefail

PROG=build-image.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
IMAGE=${1:-localhost/osdstage-exporter:latest}
BASE=localhost/osdstage-debian:bookworm
SUITE=bookworm
ROOTFS_DIR=${OSDSTAGE_ROOTFS_DIR:-/var/cache/osdstage/rootfs}
LOG_ROOT=${LAB_LOG_ROOT:-/var/log/osdstage}

msg() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }
pm() { podman "$@" 9<&-; }

# run_logged STEP CMD...: CMD's output in a log; on failure its last lines.
run_logged() {
    local step=$1 log rc=0
    shift
    mkdir -p "$LOG_ROOT"
    log=$LOG_ROOT/$step.log
    "$@" >"$log" 2>&1 9<&- || rc=$?
    ((rc == 0)) && return 0
    {
        echo "$PROG: error: step '$step' failed (exit $rc): $*"
        echo "$PROG: last lines of $log:"
        tail -n 25 "$log" | sed 's/^/    /'
    } >&2
    exit "$rc"
}

# The host's Debian mirror: the first apt source of the suite "bookworm".
apt_mirror() {
    [[ -n ${OSDSTAGE_MIRROR:-} ]] && { echo "$OSDSTAGE_MIRROR"; return 0; }
    apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 2>/dev/null |
        awk -v s="$SUITE" '$1 == s {print $2; exit}' | grep . ||
        die "no Debian $SUITE mirror in the host's apt sources; set OSDSTAGE_MIRROR"
}

[[ $(id -u) -eq 0 ]] || die "must run as root"
for t in podman runc mmdebstrap; do
    command -v "$t" >/dev/null || die "$t is not installed (apt-get install podman runc mmdebstrap)"
done
for f in osdstage.bpf.o osdstage.abi.json libcephlat_calib.so; do
    [[ -s $TOP/build/$f ]] || die "build/$f is missing: run 'make build' first"
done

# Up to date: the image carries the hash of the files it copies (a label).
sources_hash() {
    (cd "$TOP" && find lib tools/osdstage_exporter.py tools/osdstage.py build \
        deploy/container/Containerfile -type f \( -name '*.py' -o -name '*.bpf.o' \
        -o -name '*.abi.json' -o -name '*.so' -o -name Containerfile \) -print0 |
        sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-32
}
HASH=$(sources_hash)
if [[ ${REBUILD:-} != 1 ]] && pm image exists "$IMAGE" &&
    [[ $(pm image inspect -f '{{index .Labels "osdstage.sources"}}' "$IMAGE") == "$HASH" ]]; then
    exit 0
fi

tar=$ROOTFS_DIR/$SUITE.tar
if [[ ! -s $tar ]]; then
    mirror=$(apt_mirror)
    mkdir -p "$ROOTFS_DIR"
    tmp=$ROOTFS_DIR/.$SUITE.tmp.tar
    trap 'rm -f "$tmp"' EXIT
    msg "building the Debian $SUITE root filesystem in $tar (about a minute)"
    run_logged "rootfs-$SUITE" mmdebstrap --mode=root --format=tar --variant=apt \
        "$SUITE" "$tmp" "$mirror"
    mv -f "$tmp" "$tar"
    trap - EXIT
    pm image rm -f "$BASE" >/dev/null 2>&1 || true
fi
pm image exists "$BASE" ||
    run_logged "import-$SUITE" pm import --quiet "$tar" "$BASE"

# runc: crun refuses this kernel's hybrid cgroup layout;
# the host network for apt (no bridge networking needed to build).
old=$(pm image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null) || old=""
run_logged "build-exporter-image" pm build --quiet --runtime runc --network host \
    --from "$BASE" --label "osdstage.sources=$HASH" -t "$IMAGE" \
    -f "$HERE/Containerfile" "$TOP"
# the image this one replaces (untagged now), unless a container still uses it
if [[ -n $old && $old != $(pm image inspect -f '{{.Id}}' "$IMAGE") ]]; then
    pm image rm "$old" >/dev/null 2>&1 || true
fi
msg "built $IMAGE"
