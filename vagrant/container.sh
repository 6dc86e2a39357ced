#!/usr/bin/env bash
# container.sh - the single-node lab with a newer Ceph, in a container (vagrant/README.md).
#
#   container.sh RELEASE COMMAND [ARGS]      RELEASE: reef (Debian trixie, Ceph 18.2)
#                                                     tentacle (Debian sid, Ceph 20.2)
#
# The same cluster as "lab.sh up" (lab.sh runs inside the container and builds it: one mon,
# one mgr, one BlueStore OSD, pool rbd size 1, auth off; LAB_OSDS=3: three OSDs, pool rbd
# size 3, min_size 2), but the daemons are the release's own binaries from Debian's
# packages, in one podman container: their own mount, PID and UTS namespaces, host network
# and IPC, privileged, like cephadm's containers.  Each OSD's block device is a loop device
# attached on the host and passed in (LAB_LOOPDEVS).  The lab directory is bind-mounted at
# the same path, so CEPH_CONF and the admin sockets work from the host.
#
# Commands:
#   install       install podman, runc, catatonit, mmdebstrap if missing; build the cached
#                 root filesystem and import it as an image, if missing (silent otherwise)
#   up            install, stop any other lab (the host's Pacific one too), then start or
#                 check this one; LAB_OSD_OPTS as for lab.sh; LAB_OSDS=1-3 OSDs (default:
#                 the running lab's count, else 1): another count rebuilds the lab;
#                 LAB_POOL as for lab.sh (ec:2+1 with three OSDs); LAB_HOSTS=2|3 (with
#                 LAB_OSDS_PER_HOST, LAB_NET_DELAY, LAB_NET_JITTER): the multi-host lab,
#                 its network made here on the host (below)
#   env           export lines: CEPH_CONF, OSD_PID (host PID of osd.0), CEPH_RELEASE,
#                 OSD_ASOK (as seen from the host), LAB_EXEC (prefix that runs ceph/rados in
#                 the lab), LAB_CONTAINER, OSD_PIDS and OSD_ASOKS (every OSD, id order),
#                 LAB_POOL
#   down          stop it: no container, process, mount or loop device left, state deleted
#   down-if-up    "down" when anything of it exists, silent otherwise
#   workload [SECS] [THREADS]   lab.sh workload inside the container
#   trim | status               lab.sh trim / status inside the container
#   osd stop|start ID           lab.sh osd inside the container
#   net-delay HOST|client|all DELAY [JITTER]   multi-host: a link's delay (lab.sh's)
#   client-debug  install the client libraries' debug files (librados2-dbg, librbd1-dbg) and
#                 gdb in the running container, if missing: rbdrecord finds the Objecter
#                 copies of a client in the container through them (~260 MB, a few seconds)
# RELEASE "all" with down or down-if-up: every container lab.
#
# Environment: LAB_OSD_OPTS, LAB_OSDS, LAB_POOL, LAB_DISK_SIZE (16G each), LAB_LOOP_DIRECT_IO (off),
#   LAB_READY_TIMEOUT, OSDSTAGE_ROOTFS_DIR (/var/cache/osdstage/rootfs: <release>.tar),
#   OSDSTAGE_MIRROR (Debian mirror for mmdebstrap; default: the host's, from /etc/apt),
#   LAB_LOG_ROOT (/var/log/osdstage: logs of install steps).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RELEASES="reef tentacle"
HOST_LAB_DIR=${LAB_DIR:-/var/tmp/osdstage-lab}     # the host (Pacific) lab, to stop it
ROOTFS_DIR=${OSDSTAGE_ROOTFS_DIR:-/var/cache/osdstage/rootfs}
HOST_PKGS="podman runc catatonit mmdebstrap"
ROOTFS_PKGS="ceph-mon,ceph-osd,ceph-mgr,ceph-common"
IN_CTR_LAB=/osdstage/lab.sh                         # $HERE, read-only in the container

REL=${1:-}
CMD=${2:-}
(($# >= 2)) && shift 2 || set --

case $REL in
reef) SUITE=trixie VERSION=18.2 ;;
tentacle) SUITE=sid VERSION=20.2 ;;
all)
    case $CMD in down | down-if-up) ;; *) echo "container.sh: 'all' takes down or down-if-up" >&2; exit 2 ;; esac
    for r in $RELEASES; do bash "${BASH_SOURCE[0]}" "$r" "$CMD"; done
    exit 0
    ;;
*)
    echo "container.sh: unknown Ceph release '$REL': pacific (the host lab: lab.sh), reef or tentacle" >&2
    exit 2
    ;;
esac

CTR_NAME=osdstage-$REL
CTR_IMAGE=localhost/osdstage-ceph:$REL
TOP=/var/tmp/osdstage-lab-$REL

# lab.sh's helpers, for the host side of this lab: its LAB_DIR is TOP (marker, loopdev,
# disk/osd-block.img, disk/osd-block-N.img); the cluster itself lives in TOP/lab, where
# lab.sh in the container keeps it.
export LAB_DIR=$TOP
LAB_LOOPDEV=""
LAB_LOOPDEVS=""
LAB_IN_CONTAINER=""
# shellcheck source=lab.sh
source "$HERE/lab.sh"
INNER=$TOP/lab
CONF=$INNER/ceph.conf
RUN_DIR=$INNER/run
export CEPH_CONF=$CONF

pm() { podman "$@" 9<&-; }       # never let podman (conmon) inherit the lab lock

# ------------------------------------------------------------------- install / rootfs

# The Debian mirror the host's apt uses (the URI listed for the host's own suite).
apt_mirror() {
    [[ -n ${OSDSTAGE_MIRROR:-} ]] && { echo "$OSDSTAGE_MIRROR"; return 0; }
    python3 - "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" <<'EOF'
import glob, re, sys
codename = sys.argv[1]
files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")) \
    + sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
for path in files:
    try:
        text = open(path).read()
    except OSError:
        continue
    if path.endswith(".sources") or re.search(r"(?m)^Types:", text):
        for block in re.split(r"\n\s*\n", text):
            fields, key = {}, None
            for line in block.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0] in " \t" and key:
                    fields[key] += " " + line.strip()
                    continue
                k, _, v = line.partition(":")
                key = k.strip().lower()
                fields[key] = v.strip()
            if "deb" in fields.get("types", "").split() and \
                    codename in fields.get("suites", "").split() and \
                    fields.get("enabled", "yes").lower() != "no" and fields.get("uris"):
                print(fields["uris"].split()[0])
                sys.exit(0)
    else:
        for line in text.splitlines():
            w = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
            if len(w) >= 3 and w[0] == "deb" and w[2] == codename:
                print(w[1])
                sys.exit(0)
sys.exit("no Debian mirror for '%s' in /etc/apt/sources.list{,.d/}; set OSDSTAGE_MIRROR" % codename)
EOF
}

# Version of package $2 in the dpkg status of root filesystem tarball $1.
tar_pkg_version() {
    tar -xOf "$1" ./var/lib/dpkg/status |
        awk -v p="$2" '$0 == "Package: " p {f = 1} f && /^Version:/ {print $2; f = 0}'
}

build_rootfs() {
    local tar=$ROOTFS_DIR/$REL.tar tmp mirror ver start=$SECONDS
    [[ -s $tar ]] && return 0
    mirror=$(apt_mirror) || die "cannot find the host's Debian mirror in /etc/apt; set OSDSTAGE_MIRROR"
    mkdir -p "$ROOTFS_DIR"
    tmp=$ROOTFS_DIR/.$REL.tmp.tar
    rm -f "$tmp"
    trap 'rm -f "$tmp"' EXIT            # no half-built tarball after a failure
    msg "building the $REL root filesystem (Debian $SUITE, Ceph $VERSION) in $tar (about a minute)"
    # A mirror snapshot serves a sid Release file past its Valid-Until date: accept it.
    run_logged "rootfs-$REL" mmdebstrap --mode=root --format=tar --variant=apt \
        --aptopt='Acquire::Check-Valid-Until "false"' --include="$ROOTFS_PKGS" \
        "$SUITE" "$tmp" "$mirror"
    ver=$(tar_pkg_version "$tmp" ceph-osd)
    if [[ $ver != "$VERSION".* ]]; then
        rm -f "$tmp"
        die "Debian $SUITE has ceph-osd '${ver:-none}', not $VERSION.x: CEPH=$REL cannot be built from it"
    fi
    mv -f "$tmp" "$tar"
    trap - EXIT
    pm image rm -f "$CTR_IMAGE" >/dev/null 2>&1 || true     # an image of an older tarball
    msg "$tar: ceph-osd $ver, $(du -m "$tar" | cut -f1) MB, built in $((SECONDS - start))s"
}

import_image() {
    pm image exists "$CTR_IMAGE" && return 0
    run_logged "import-$REL" pm import --quiet "$ROOTFS_DIR/$REL.tar" "$CTR_IMAGE"
}

cmd_ctr_install() {
    need_root
    cmd_install $HOST_PKGS
    build_rootfs
    import_image
}

# ------------------------------------------------------------------------ state

ctr_exists() { pm container exists "$CTR_NAME" 2>/dev/null; }
ctr_running() { [[ $(pm container inspect -f '{{.State.Running}}' "$CTR_NAME" 2>/dev/null) == true ]]; }

# lab.sh inside the container, with this lab's settings; we hold the lab lock.  Its OSDs
# are as many as the loop devices attached here (TOP/loopdev, one a line).
in_ctr() {
    local loops
    loops=$(paste -sd' ' "$TOP/loopdev" 2>/dev/null) || loops=""
    local envs=(-e "LAB_DIR=$INNER" -e "LAB_LOOPDEVS=$loops" -e "LAB_IN_CONTAINER=$REL"
        -e "LAB_LOCK_HELD=1" -e "CEPH_CONF=$CONF" -e "LAB_OSD_OPTS=${LAB_OSD_OPTS:-}")
    if [[ -s $TOP/net ]]; then      # the multi-host lab: its network is ours (ctr_net_up)
        local hosts per delay jitter
        read -r hosts per delay jitter _ <"$TOP/net"
        envs+=(-e "LAB_HOSTS=$hosts" -e "LAB_OSDS_PER_HOST=$per" -e "LAB_NET_DELAY=${delay}us"
            -e "LAB_NET_JITTER=${jitter}us" -e "LAB_NET_EXTERNAL=1")
    elif [[ -n $loops ]]; then
        envs+=(-e "LAB_OSDS=$(wc -w <<<"$loops")")
    fi
    local v
    for v in LAB_READY_TIMEOUT LAB_STOP_TIMEOUT LAB_CLEANUP_PCT CEPH_CMD_TIMEOUT SECS THREADS \
        LAB_POOL; do
        [[ -n ${!v:-} ]] && envs+=(-e "$v=${!v}")
    done
    pm exec "${envs[@]}" "$CTR_NAME" bash "$IN_CTR_LAB" "$@"
}

# Host PID of the container's daemon $1 (osd.0, mon.a, ...): the process whose command
# line names this lab's ceph.conf and whose innermost PID is the one in its pid file.
host_pid_of() {
    local name=$1 inner p ns
    inner=$(cat "$RUN_DIR/ceph-$name.pid" 2>/dev/null) || return 1
    [[ $inner =~ ^[0-9]+$ ]] || return 1
    for p in /proc/[0-9]*; do
        [[ $(cat "$p/comm" 2>/dev/null) == "ceph-${name%%.*}" ]] || continue
        ns=$(awk '/^NSpid:/ {print $NF}' "$p/status" 2>/dev/null) || continue
        [[ $ns == "$inner" && $p != "/proc/$inner" ]] || continue
        [[ " $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) " == *" $CONF "* ]] || continue
        alive "${p#/proc/}" || continue
        echo "${p#/proc/}"
        return 0
    done
    return 1
}

inner_osd_id() { [[ -s $INNER/osd-id ]] && head -n1 "$INNER/osd-id"; }
inner_osd_ids() { [[ -s $INNER/osd-id ]] && cat "$INNER/osd-id"; }

# "ID HOSTPID" per OSD of the running lab, in id order; fails unless every one runs.
osd_host_pids() {
    local id pid ids
    ids=$(inner_osd_ids) || return 1
    for id in $ids; do
        pid=$(host_pid_of "osd.$id") || return 1
        echo "$id $pid"
    done
}

# The OSD count "up" builds or keeps: LAB_OSDS, else the running lab's (one loop device
# per OSD), else 1; checked by lab.sh's want_osds (bad: one line, exit 1).
ctr_want_osds() {
    local n=${LAB_OSDS:-}
    if [[ -z $n ]]; then
        n=1
        if [[ -s $TOP/loopdev ]] && ctr_running; then n=$(wc -l <"$TOP/loopdev"); fi
    fi
    LAB_OSDS=$n want_osds
}

# ------------------------------------------------------------------------ multi-host

# The multi-host lab in the container (LAB_HOSTS): its network -- the hosts' namespaces
# and labwire (labnet.sh) -- is made here on the host, as for the host lab (the
# container has no iproute2, and the wire is a host process); the container gets the
# host's /run/netns, where lab.sh (LAB_NET_EXTERNAL=1) starts each OSD in its host's
# namespace and the client runs, and where the tracer on the host finds them by name.
# TOP/net holds the network's spec (labnet.sh's net_spec), as lab.sh's LAB_DIR/net.

# ctr_net_up SPEC: the namespaces and the wire of a fresh lab, then TOP/net.
ctr_net_up() {
    local hosts delay jitter
    read -r hosts _ delay jitter _ <<<"$1"
    mkdir -p "$TOP/log"
    net_up "$hosts" "$delay" "$jitter"
    echo "$1" >"$TOP/net"
}

# The multi-host lab's network is there (lab.sh's net_ok, over the lab's hosts file).
ctr_net_ok() { (LAB_DIR=$INNER; net_ok); }

# ------------------------------------------------------------------------ commands

# ulimits for the container: podman sets them explicitly (its defaults exceed this
# machine's hard limits and runc refuses them); at most the caller's hard limits, and
# nproc at most 32768, above which runc fails here ("error setting rlimit type 6").
ulimit_args() {
    local nofile nproc
    nofile=$(ulimit -Hn); [[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
    nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
    echo "--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
}

start_container() {   # start_container N_OSDS
    local n=$1 loop devices=() loops=()
    make_dirs_top
    attach_loops "$n"           # lab.sh's, into $TOP (= LAB_DIR here)/loopdev
    loops=("${LOOPS[@]}")
    for loop in "${loops[@]}"; do
        devices+=(--device "$loop")
    done
    if ((n == 1)); then
        msg "starting container $CTR_NAME ($CTR_IMAGE), OSD block device $loop"
    else
        msg "starting container $CTR_NAME ($CTR_IMAGE), OSD block devices ${loops[*]}"
    fi
    local netns=()
    [[ -s $TOP/net ]] && netns=(--mount type=bind,src=/run/netns,dst=/run/netns,bind-propagation=rslave)
    # shellcheck disable=SC2046
    run_logged "podman-run-$REL" pm run -d --name "$CTR_NAME" \
        --runtime runc --init --network host --ipc host --privileged \
        $(ulimit_args) "${devices[@]}" "${netns[@]}" \
        -v "$TOP:$TOP" -v "$HERE:${IN_CTR_LAB%/*}:ro" \
        --label "osdstage.lab=$REL" "$CTR_IMAGE" sleep infinity
    # "ceph -s" in the container finds the lab without CEPH_CONF
    pm exec "$CTR_NAME" sh -c "mkdir -p /etc/ceph && ln -sf '$CONF' /etc/ceph/ceph.conf"
}

make_dirs_top() {
    mkdir -p "$TOP/disk"
    touch "$MARKER"
}

stop_other_labs() {
    local r
    if [[ -d $HOST_LAB_DIR ]]; then
        CEPH=pacific LAB_DIR=$HOST_LAB_DIR LAB_IN_CONTAINER="" LAB_LOOPDEV="" bash "$HERE/lab.sh" down
    fi
    for r in $RELEASES; do
        [[ $r == "$REL" ]] || bash "${BASH_SOURCE[0]}" "$r" down-if-up
    done
}

cmd_ctr_up() {
    need_root
    lock
    local start=$SECONDS loops want have="" lines id pid parts=() joined hosts per spec=""
    local ns
    # reject bad LAB_OSD_OPTS, LAB_OSDS, LAB_HOSTS, ... before changing anything
    OPTS=$(normalize_opts)
    # LAB_HOSTS (checked), else the built lab's, as for the host lab (its LAB_DIR/net)
    hosts=$(LAB_DIR=$INNER want_hosts) || exit 1
    if ((hosts)); then
        LAB_DIR=$INNER keep_running_net
        per=$(want_per_host) || exit 1
        want=$((hosts * per))
        spec=$(net_spec "$hosts" "$per") || exit 1
    else
        want=$(ctr_want_osds) || exit 1
    fi
    cmd_ctr_install
    stop_other_labs
    [[ -s $TOP/loopdev ]] && have=$(wc -l <"$TOP/loopdev")
    if [[ $have == "$want" && $(cat "$TOP/net" 2>/dev/null) == "$spec" ]] && ctr_running &&
        [[ -e $INNER/built ]] && loops=$(lab_loopdevs) && { [[ -z $spec ]] || ctr_net_ok; }; then
        in_ctr up                   # restart what is not running, apply LAB_OSD_OPTS
    else
        if [[ -n $have && $have != "$want" ]] && ctr_running; then
            msg "the $REL lab has $have OSD(s), $want wanted: rebuilding from scratch"
        elif [[ -e $TOP ]] || ctr_exists; then
            msg "no usable $REL lab: rebuilding from scratch"
        fi
        cmd_ctr_down
        make_dirs_top
        [[ -z $spec ]] || ctr_net_up "$spec"
        start_container "$want"
        in_ctr up
    fi
    lines=$(osd_host_pids) || die "an OSD of the $REL lab is not running; see $INNER/log/"
    while read -r id pid; do
        ns=""
        [[ -z $spec ]] || ns=" on $(LAB_DIR=$INNER ns_of_osd "$id")"
        parts+=("osd.$id host pid $pid$ns")
    done <<<"$lines"
    if ((${#parts[@]} == 1)); then
        joined=${parts[0]}
    else
        printf -v joined '%s, ' "${parts[@]}"
        joined="${#parts[@]} OSDs: ${joined%, }"
    fi
    msg "$REL lab up in $((SECONDS - start))s: CEPH_CONF=$CONF $joined (container $CTR_NAME)"
}

cmd_ctr_down() {
    need_root
    lock
    if ctr_running && [[ -d $INNER ]]; then
        in_ctr down || msg "warning: lab.sh down in $CTR_NAME failed; removing the container anyway"
    fi
    if ctr_exists; then
        msg "removing container $CTR_NAME"
        run_logged "podman-rm-$REL" pm rm -f -t 10 "$CTR_NAME"
    fi
    finish_down     # a daemon that outlived its container, the loop device, TOP
}

cmd_ctr_down_if_up() {
    if [[ -e $TOP ]] || { command -v podman >/dev/null && ctr_exists; }; then
        cmd_ctr_down
    fi
    return 0
}

cmd_ctr_env() {
    local lines id pid pids=() asoks=() joined
    if ! lines=$(osd_host_pids); then
        echo "container.sh: the $REL lab is not up; run 'make lab CEPH=$REL'" >&2
        exit 1
    fi
    while read -r id pid; do
        pids+=("$pid")
        asoks+=("$(printf '%q' "/proc/$pid/root$RUN_DIR/ceph-osd.$id.asok")")
    done <<<"$lines"
    printf 'export CEPH_CONF=%q\n' "$CONF"
    printf 'export OSD_PID=%s\n' "${pids[0]}"
    printf 'export CEPH_RELEASE=%s\n' "$REL"
    printf 'export OSD_ASOK=%s\n' "${asoks[0]}"
    printf 'export LAB_EXEC=%q\n' "podman exec $CTR_NAME"
    printf 'export LAB_CONTAINER=%s\n' "$CTR_NAME"
    printf -v joined '%s,' "${pids[@]}"
    printf 'export OSD_PIDS=%s\n' "${joined%,}"
    printf -v joined '%s,' "${asoks[@]}"
    printf 'export OSD_ASOKS=%s\n' "${joined%,}"
    if [[ -s $INNER/hosts ]]; then
        printf 'export OSD_NETNS=%s\n' "$(for id in $(inner_osd_ids); do LAB_DIR=$INNER ns_of_osd "$id"; done | paste -sd,)"
        printf 'export CLIENT_NETNS=%s\n' "$CLIENT_NS"
    fi
    printf 'export LAB_POOL=%s\n' "$(cat "$INNER/pool" 2>/dev/null || echo replicated)"
}

need_up() {
    ctr_running || die "the $REL lab is not up; run 'make lab CEPH=$REL'"
}

CLIENT_DEBUG_PKGS="librados2-dbg librbd1-dbg gdb"

cmd_ctr_client_debug() {
    need_up
    # shellcheck disable=SC2086
    pm exec "$CTR_NAME" dpkg -s $CLIENT_DEBUG_PKGS >/dev/null 2>&1 && return 0
    run_logged "client-debug-update-$REL" pm exec "$CTR_NAME" apt-get update -q
    # shellcheck disable=SC2086
    run_logged "client-debug-install-$REL" pm exec -e DEBIAN_FRONTEND=noninteractive \
        "$CTR_NAME" apt-get install -y -q --no-install-recommends $CLIENT_DEBUG_PKGS
}

case $CMD in
install) cmd_ctr_install ;;
up) cmd_ctr_up ;;
env) cmd_ctr_env ;;
down) cmd_ctr_down ;;
down-if-up) cmd_ctr_down_if_up ;;
workload) need_up; in_ctr workload "$@" ;;
trim) need_up; in_ctr trim ;;
osd) need_up; in_ctr osd "$@" ;;
net-delay)
    need_up
    [[ -s $TOP/net ]] || die "the $REL lab is not a multi-host lab (make lab CEPH=$REL HOSTS=3)"
    lock
    (LAB_DIR=$INNER; cmd_net_delay "$@")
    ;;
client-debug) cmd_ctr_client_debug ;;
status)
    if ctr_running; then echo "$REL (container $CTR_NAME): $(in_ctr status)"; else echo "$REL: down"; fi ;;
*) sed -n '/^# Commands:/,/^# Environment/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
