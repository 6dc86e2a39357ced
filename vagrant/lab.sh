#!/usr/bin/env bash
# lab.sh - provision the Ceph test bed for osdstage (see vagrant/README.md).
#
# One script for both labs:
#   single node (this machine): one mon (a), one mgr (x), one BlueStore OSD (0) whose
#     block device is a loop device over a sparse file, pool "rbd" (16 PGs, size 1) and
#     image rbd/img1.  Everything lives under $LAB_DIR (default /var/tmp/osdstage-lab).
#     LAB_OSDS=3 (make lab OSDS=3): three OSDs (0, 1, 2), each on its own loop device over
#     its own sparse file, CRUSH failure domain "osd", pool rbd size 3, min_size 2
#     (fresh: ~30 s instead of ~20 s).  LAB_OSDS=2 works too (size 2, min_size 1).
#   multi host (this machine): LAB_HOSTS=2|3 (make lab HOSTS=3): each host a network
#     namespace (osdlab-h1 ...) with LAB_OSDS_PER_HOST OSDs (default 1), CRUSH failure
#     domain "host", pool rbd size 3 (2 with two hosts); the client's namespace is
#     osdlab-client; the mon and mgr stay in this machine's namespace. The wire between
#     them delays each host's packets by LAB_NET_DELAY (vagrant/labnet.sh says how, and
#     what differs from real hosts).
#   multi node (Vagrant): "vagrant-mon IP" on the mon node (mon a + mgr x), and
#     "vagrant-osd MON_IP DISK" on each OSD node (one OSD on a spare disk).  The
#     single-node lab is the special case: every address is 127.0.0.1, the disk is a loop
#     device, and all roles run on one host.  The same config generator and the same
#     daemon start/stop code serve both.
#
# Subcommands:
#   install [PKG...]        install the missing Debian packages (default: the lab's; silent
#                           when none is missing; on failure names the step and shows apt's
#                           own last lines, the whole output is in $LAB_LOG_ROOT)
#   up                      build/start the single-node lab, or leave it if healthy;
#                           LAB_OSD_OPTS="k=v k=v" goes into [osd]; a change restarts the
#                           OSDs; LAB_OSDS=N (1-3) OSDs: a lab with another count is rebuilt
#                           (its data thrown away); without LAB_OSDS: the running lab's count,
#                           else 1
#   env                     print "export CEPH_CONF=...", "export OSD_PID=..." (osd.0),
#                           "export OSD_PIDS=p0,p1,..." and "export OSD_ASOKS=a0,a1,..."
#                           (every OSD, in id order); on the multi-host lab also
#                           "export OSD_NETNS=ns0,ns1,..." (each OSD's host) and
#                           "export CLIENT_NETNS=osdlab-client"
#   net-delay HOST|client|all DELAY [JITTER]  multi-host lab: change a link's delay
#                           (HOST: h1, osdlab-h1 or 1; DELAY such as 0.5ms, 500us, 0)
#   down                    stop the lab's daemons, detach its loop devices and DELETE the
#                           lab state: the next "up" builds a fresh cluster (reproducible)
#   workload [SECS] [THREADS]  rados bench 4 KiB writes, then random reads, on pool rbd
#                           (from the client's namespace on the multi-host lab)
#   trim                    drop old benchmark objects when the OSD is half full
#   osd stop|start ID       stop one OSD of a running lab (SIGTERM: it marks itself
#                           down) or start it again, without waiting for the cluster to
#                           be clean: a lab aid for recovery (set noout first to keep
#                           its data where it is)
#   status                  one-line summary
#   vagrant-mon IP          multi-node: mon + mgr node
#   vagrant-osd MON_IP DISK multi-node: OSD node; DISK is a block device or "auto"
#
# Daemons are started directly (no systemd) and run as root.  Auth is off: lab only.
#
# Environment:
#   LAB_DIR            lab state directory           (default /var/tmp/osdstage-lab)
#   LAB_OSD_OPTS       extra [osd] options, space-separated key=value pairs (every OSD)
#   LAB_OSDS           OSDs of the single-node lab, 1-3 (default: the running lab's, else 1)
#   LAB_HOSTS          hosts of the multi-host lab, 2-3 (default: the running lab's, else
#                      the single-node lab)
#   LAB_OSDS_PER_HOST  OSDs on each host, 1-2 (default 1)
#   LAB_NET_DELAY      multi-host: each host's link delay, one way (0.5ms, 500us; default 0)
#   LAB_NET_JITTER     multi-host: up to this much more, uniformly (default 0)
#   LAB_SUBNET         multi-host: the lab's /24, its first three octets (default 10.77.0)
#   LAB_WIRE           multi-host: the labwire binary (default: built from vagrant/labwire.c)
#   LAB_DISK_SIZE      size of each sparse OSD file   (default 16G, single node)
#   LAB_POOL_SIZE      replicas of pool rbd           (default: the number of OSDs, single
#                      node; 1, multi node); min_size is size - size/2 (single node)
#   LAB_POOL           replicated (default) or ec:K+M: image img1's data in an erasure-
#                      coded pool rbd-ec (profile k=K m=M, failure domain host on the
#                      multi-host lab, osd on one node; overwrites on; its metadata stays
#                      in pool rbd). Changing it on a running lab makes img1 anew (its data
#                      goes; back to replicated, pool rbd-ec goes too); K+M at most the
#                      failure domains
#   LAB_LOOP_DIRECT_IO on|off: loop device bypasses the page cache (default off)
#   LAB_FSID           cluster fsid (multi node; else read from $LAB_SHARED/fsid)
#   LAB_SHARED         folder shared by the Vagrant nodes (default /vagrant/.lab)
#   LAB_PACKAGES       packages "install" ensures     (default below)
#   LAB_LOOPDEVS       loop devices over the OSDs' disk files that the caller attached
#                      (the container lab, vagrant/container.sh), space-separated, one per
#                      OSD in id order: the OSDs' block devices, never attached or detached
#                      here (LAB_LOOPDEV: the older name for a single one)
#   LAB_LOG_ROOT       logs of install steps          (default /var/log/osdstage)
#   SECS, THREADS      workload defaults              (10, 16)
#   CEPH               pacific (default): this host's Ceph; reef or tentacle: up, env,
#                      down, workload, trim, status, osd and net-delay act on that
#                      release's lab in a container (vagrant/container.sh; LAB_HOSTS too)
#   LAB_NET_EXTERNAL   multi-host, set by container.sh: the namespaces and the wire are
#                      the caller's (made and removed outside; labnet.sh only uses them)
set -euo pipefail

LAB_DIR=${LAB_DIR:-/var/tmp/osdstage-lab}
LAB_SHARED=${LAB_SHARED:-/vagrant/.lab}
LAB_DISK_SIZE=${LAB_DISK_SIZE:-16G}
LAB_POOL_SIZE_SET=${LAB_POOL_SIZE:+1}        # single node: unset means one replica per OSD
LAB_POOL_SIZE=${LAB_POOL_SIZE:-1}
POOL_MIN_SIZE=1
LAB_OSDS=${LAB_OSDS:-}
MAX_OSDS=3
LAB_LOOP_DIRECT_IO=${LAB_LOOP_DIRECT_IO:-off}
LAB_PACKAGES=${LAB_PACKAGES:-ceph-mon ceph-osd ceph-mgr ceph-common ceph-osd-dbg fio util-linux python3}
LAB_LOOPDEVS=${LAB_LOOPDEVS:-${LAB_LOOPDEV:-}}
LAB_LOOPDEVS=${LAB_LOOPDEVS//,/ }
LAB_LOG_ROOT=${LAB_LOG_ROOT:-/var/log/osdstage}
READY_TIMEOUT=${LAB_READY_TIMEOUT:-60}     # seconds to wait for a healthy cluster
STOP_TIMEOUT=${LAB_STOP_TIMEOUT:-20}       # seconds between SIGTERM and SIGKILL

CONF=$LAB_DIR/ceph.conf
RUN_DIR=$LAB_DIR/run
LOG_DIR=$LAB_DIR/log
IMG=$LAB_DIR/disk/osd-block.img            # osd.0's; outside the OSD data dir (BlueStore needs that)
MARKER=$LAB_DIR/.osdstage-lab              # "this directory is ours": down may delete it
MON_ID=a
MGR_ID=x
POOL=rbd
PG_NUM=16
IMAGE=img1

export CEPH_CONF=$CONF
OSD_HOSTS=()       # create_osds: each device's host (namespace), multi-host lab only
CRUSH_HOSTS_FIXED= # write_conf: the OSDs keep the CRUSH host they were added under

# ------------------------------------------------------------------------------ parts

# the multi-host lab's network (LAB_HOSTS): namespaces, the wire, link delays
# shellcheck source=labnet.sh
source "$(dirname "${BASH_SOURCE[0]}")/labnet.sh"

# the rest of lab.sh, by concern (functions; labcore.sh also sets PROG)
# shellcheck source=labcore.sh
source "$(dirname "${BASH_SOURCE[0]}")/labcore.sh"
# shellcheck source=labcluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/labcluster.sh"
# shellcheck source=labvagrant.sh
source "$(dirname "${BASH_SOURCE[0]}")/labvagrant.sh"

# ------------------------------------------------------------------------- subcommands

cmd_install() {   # cmd_install [PKG...]   (default: LAB_PACKAGES)
    local p missing=()
    (($#)) || set -- $LAB_PACKAGES
    for p in "$@"; do
        [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] ||
            missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    need_root
    msg "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    run_logged apt-get-update apt-get update
    run_logged apt-get-install apt-get install -y --no-install-recommends "${missing[@]}"
}

cmd_down() {
    need_root
    check_lab_dir
    local id names=()
    if [[ -d $LAB_DIR ]]; then
        for id in $(osd_ids || true); do
            names+=("osd.$id")
        done
        ((${#names[@]} == 0)) || stop_daemons "${names[@]}"
        stop_daemon "mgr.$MGR_ID"
        stop_daemon "mon.$MON_ID"
        finish_down
    fi
    return 0
}

# The end of every "down": stop what is left of the lab's daemons (found by their
# command line), detach its loop devices, wait until the daemons are reaped, delete
# LAB_DIR (only when it is ours, MARKER, or empty).
finish_down() {
    local pid
    for pid in $(stray_pids); do
        msg "stopping stray lab daemon pid $pid ($(cat "/proc/$pid/comm" 2>/dev/null))"
        stop_pid "$pid"
    done
    net_down
    detach_loops
    wait_reaped
    [[ -d $LAB_DIR ]] || return 0
    if [[ -e $MARKER ]]; then
        rm -rf -- "$LAB_DIR"
    elif [[ -n $(ls -A "$LAB_DIR") ]]; then
        die "$LAB_DIR has no $MARKER file; not deleting it"
    else
        rmdir -- "$LAB_DIR"
    fi
}

# attach_loops N: N sparse disk files, each on a loop device (LOOPS, recorded in
# $LAB_DIR/loopdev at once: "down" detaches them).
LOOPS=()
attach_loops() {
    local n=$1 i img loop who
    LOOPS=()
    : >"$LAB_DIR/loopdev"
    for ((i = 0; i < n; i++)); do
        img=$(img_of "$i")
        truncate -s "$LAB_DISK_SIZE" "$img"
        loop=$(losetup --direct-io="$LAB_LOOP_DIRECT_IO" -f --show "$img") ||
            die "losetup failed (is the loop module available?)"
        echo "$loop" >>"$LAB_DIR/loopdev"
        LOOPS+=("$loop")
        who="OSD"; ((n == 1)) || who="osd.$i"
        msg "$who block device: $loop (sparse $LAB_DISK_SIZE file $img)"
    done
}

# use_loops N: the OSDs' N block devices in LOOPS: the caller's (LAB_LOOPDEVS, blanked)
# or attached here.
use_loops() {
    local n=$1 i loop who
    if [[ -z $LAB_LOOPDEVS ]]; then
        attach_loops "$n"
        return
    fi
    read -ra LOOPS <<<"$LAB_LOOPDEVS"
    ((${#LOOPS[@]} == n)) || die "LAB_LOOPDEVS names ${#LOOPS[@]} devices for $n OSDs"
    for i in "${!LOOPS[@]}"; do
        loop=${LOOPS[i]}
        [[ -b $loop ]] || die "LAB_LOOPDEVS: $loop is not a block device"
        # it may hold an older lab's BlueStore: mkfs must start from a blank device
        dd if=/dev/zero of="$loop" bs=1M count=100 oflag=direct status=none
        who="OSD"; ((n == 1)) || who="osd.$i"
        msg "$who block device: $loop (attached by the caller)"
    done
    printf '%s\n' "${LOOPS[@]}" >"$LAB_DIR/loopdev"
}

# build_hosts HOSTS PER_HOST: a fresh multi-host cluster (labnet.sh) in an empty LAB_DIR:
# the network first, then the mon, the pool and the OSDs, each on its host.
build_hosts() {
    local hosts=$1 per=$2 fsid k j spec delay jitter
    spec=$(net_spec "$hosts" "$per")
    make_dirs
    fsid=$(cat /proc/sys/kernel/random/uuid)
    echo "$fsid" >"$LAB_DIR/fsid"
    read -r _ _ delay jitter _ <<<"$spec"
    net_up "$hosts" "$delay" "$jitter"
    use_loops $((hosts * per))
    OSD_HOSTS=()
    for ((k = 1; k <= hosts; k++)); do
        for ((j = 0; j < per; j++)); do OSD_HOSTS+=("$(host_ns "$k")"); done
    done
    write_conf "$fsid" "$MON_HOST_IP" "$LAB_SUBNET.0/24" "${LOOPS[*]}" 1
    create_mon "$fsid" "$MON_HOST_IP"
    create_pool
    create_osds "${LOOPS[@]}"
    printf '%s' "$OPTS" >"$LAB_DIR/osd-opts.applied"
    echo "$spec" >"$LAB_DIR/net"
    wait_ready $((hosts * per))
    init_rbd
    touch "$LAB_DIR/built"
}

# build_single N: build a fresh single-node cluster of N OSDs in an empty LAB_DIR.
build_single() {
    local n=$1 fsid loops=()
    make_dirs
    fsid=$(cat /proc/sys/kernel/random/uuid)
    echo "$fsid" >"$LAB_DIR/fsid"
    use_loops "$n"
    loops=("${LOOPS[@]}")
    write_conf "$fsid" 127.0.0.1 127.0.0.0/8 "${loops[*]}" 0
    create_mon "$fsid" 127.0.0.1
    create_pool
    create_osds "${loops[@]}"
    printf '%s' "$OPTS" >"$LAB_DIR/osd-opts.applied"
    wait_ready "$n"
    init_rbd
    touch "$LAB_DIR/built"
}

# check_lab_pool FAILURE_DOMAINS DOMAIN_TYPE: LAB_POOL is one the lab can make, checked
# before anything is built or changed.
check_lab_pool() {
    local domains=$1 type=$2 want=${LAB_POOL:-replicated} k m
    [[ $want == replicated ]] && return 0
    [[ $want =~ ^ec:([0-9]+)\+([0-9]+)$ ]] ||
        die "LAB_POOL=$want: want replicated or ec:K+M (e.g. ec:2+1)"
    k=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]}
    ((k >= 2 && m >= 1)) || die "LAB_POOL=$want: k must be at least 2 and m at least 1"
    ((k + m <= domains)) ||
        die "LAB_POOL=$want: k+m=$((k + m)) shards need as many ${type}s; the lab has $domains"
}

# ensure_data_pool FAILURE_DOMAINS DOMAIN_TYPE OSDS: img1's data where LAB_POOL asks
# (replicated: pool rbd; ec:K+M: pool rbd-ec), then ready again when it moved;
# $LAB_DIR/pool says where it is now.
ensure_data_pool() {
    local domains=$1 type=$2 osds=$3 want=${LAB_POOL:-replicated} have k m
    have=$(cat "$LAB_DIR/pool" 2>/dev/null || echo replicated)
    [[ $want == "$have" ]] && return 0
    check_lab_pool "$domains" "$type"
    if [[ $want != replicated ]]; then
        [[ $want =~ ^ec:([0-9]+)\+([0-9]+)$ ]]
        k=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]}
    fi
    timeout 60 rbd rm "$POOL/$IMAGE" >/dev/null 2>&1 || true
    cephc osd pool rm rbd-ec rbd-ec --yes-i-really-really-mean-it >/dev/null 2>&1 || true
    if [[ $want == replicated ]]; then
        timeout 30 rbd create --size 1024 "$POOL/$IMAGE" || die "rbd create $POOL/$IMAGE failed"
    else
        cephc osd erasure-code-profile set "lab-ec-$k-$m" k="$k" m="$m" \
            crush-failure-domain="$type" --force >/dev/null 2>&1 ||
            die "ceph osd erasure-code-profile set lab-ec-$k-$m failed"
        cephc osd pool create rbd-ec "$PG_NUM" "$PG_NUM" erasure "lab-ec-$k-$m" >/dev/null 2>&1 ||
            die "ceph osd pool create rbd-ec (erasure, lab-ec-$k-$m) failed"
        cephc osd pool set rbd-ec allow_ec_overwrites true >/dev/null 2>&1 ||
            die "ceph osd pool set rbd-ec allow_ec_overwrites true failed"
        cephc osd pool application enable rbd-ec rbd >/dev/null 2>&1 || true
        timeout 60 rbd create --size 1024 --data-pool rbd-ec "$POOL/$IMAGE" ||
            die "rbd create --data-pool rbd-ec $POOL/$IMAGE failed"
    fi
    echo "$want" >"$LAB_DIR/pool"
    msg "image $POOL/$IMAGE: data in $([[ $want == replicated ]] && echo "pool $POOL" || echo "pool rbd-ec ($want)")"
    wait_ready "$osds"
}

# "osd.0 pid P" or, with several OSDs, "3 OSDs: osd.0 pid P0, osd.1 pid P1, ..."
osds_summary() {
    local id parts=() n joined
    for id in $(osd_ids); do
        parts+=("osd.$id pid $(daemon_pid "osd.$id" || echo none)")
    done
    n=${#parts[@]}
    if ((n == 1)); then
        echo "${parts[0]}"
    else
        printf -v joined '%s, ' "${parts[@]}"
        echo "$n OSDs: ${joined%, }"
    fi
}

cmd_up() {
    need_root
    check_lab_dir
    command -v ceph-osd >/dev/null || die "ceph-osd not found; run 'lab.sh install' first"
    local start=$SECONDS loops want have="" hosts per
    OPTS=$(normalize_opts)
    keep_running_net
    hosts=$(want_hosts)
    if ((hosts)); then
        per=$(want_per_host)
        check_lab_pool "$hosts" host
        up_hosts "$hosts" "$per"
        msg "lab up in $((SECONDS - start))s: CEPH_CONF=$CONF $(osds_summary)$(hosts_summary)"
        return
    fi
    want=$(want_osds)
    check_lab_pool "$want" osd
    set_pool_size "$want"
    stop_container_labs
    [[ -e $LAB_DIR/built ]] && have=$(osd_count) || true
    [[ -s $LAB_DIR/net ]] && have="$have on hosts"
    if [[ $have == "$want" ]] && loops=$(lab_loopdevs) && (($(wc -w <<<"$loops") == want)); then
        # Existing lab: (re)start what is not running, apply option changes, check health.
        write_conf "$(<"$LAB_DIR/fsid")" 127.0.0.1 127.0.0.0/8 "$loops" 0
        start_daemon mon "$MON_ID"
        start_daemon mgr "$MGR_ID"
        apply_osd_opts $(osd_ids)
        wait_ready "$want"
    else
        if [[ -n $have && $have != "$want" ]]; then
            msg "the lab in $LAB_DIR has $have OSD(s), $want wanted: rebuilding from scratch"
        elif [[ -e $LAB_DIR ]]; then
            msg "no usable lab in $LAB_DIR: rebuilding from scratch"
        fi
        cmd_down
        build_single "$want"
    fi
    ensure_data_pool "$want" osd "$want"
    msg "lab up in $((SECONDS - start))s: CEPH_CONF=$CONF $(osds_summary)"
}

# up_hosts HOSTS PER_HOST: keep the running multi-host lab when it is the one asked for
# (the same hosts, OSDs and link delays) and its network is there, else build it anew.
up_hosts() {
    local hosts=$1 per=$2 n=$(($1 * $2)) spec loops
    [[ -n ${LAB_POOL_SIZE_SET:-} ]] || LAB_POOL_SIZE=$((hosts < 3 ? hosts : 3))
    POOL_MIN_SIZE=$((LAB_POOL_SIZE - LAB_POOL_SIZE / 2))
    spec=$(net_spec "$hosts" "$per")
    CRUSH_HOSTS_FIXED=1
    stop_container_labs
    if [[ -e $LAB_DIR/built && $(cat "$LAB_DIR/net" 2>/dev/null) == "$spec" ]] && net_ok &&
        loops=$(lab_loopdevs) && (($(wc -w <<<"$loops") == n)); then
        write_conf "$(<"$LAB_DIR/fsid")" "$MON_HOST_IP" "$LAB_SUBNET.0/24" "$loops" 1
        start_daemon mon "$MON_ID"
        start_daemon mgr "$MGR_ID"
        apply_osd_opts $(osd_ids)
        wait_ready "$n"
    else
        [[ -e $LAB_DIR ]] && msg "no multi-host lab of $hosts hosts ($spec) in $LAB_DIR: rebuilding from scratch"
        cmd_down
        build_hosts "$hosts" "$per"
    fi
    ensure_data_pool "$hosts" host "$n"
}

# One lab at a time: the host lab stops the container labs (vagrant/container.sh) first.
# Not from inside a container lab (LAB_IN_CONTAINER set), where this script runs too.
stop_container_labs() {
    local ctr
    [[ -z ${LAB_IN_CONTAINER:-} ]] || return 0
    ctr=$(dirname "${BASH_SOURCE[0]}")/container.sh
    [[ -r $ctr ]] || return 0
    bash "$ctr" all down-if-up
}

# Every OSD of the lab running: "PID ASOK" lines in id order; else fails.
osd_pid_lines() {
    local id pid ids
    ids=$(osd_ids 2>/dev/null) || return 1
    for id in $ids; do
        pid=$(daemon_pid "osd.$id") || return 1
        echo "$pid $RUN_DIR/ceph-osd.$id.asok"
    done
}

cmd_env() {
    local lines pids asoks
    if ! lines=$(osd_pid_lines); then
        echo "lab.sh: lab is not up (LAB_DIR=$LAB_DIR); run 'make lab' or 'vagrant/lab.sh up'" >&2
        exit 1
    fi
    pids=$(cut -d' ' -f1 <<<"$lines" | paste -sd,)
    asoks=$(cut -d' ' -f2- <<<"$lines" | while read -r a; do printf '%q\n' "$a"; done | paste -sd,)
    printf 'export CEPH_CONF=%q\n' "$CONF"
    printf 'export OSD_PID=%s\n' "${pids%%,*}"
    printf 'export OSD_PIDS=%s\n' "$pids"
    printf 'export OSD_ASOKS=%s\n' "$asoks"
    if [[ -s $LAB_DIR/hosts ]]; then
        printf 'export OSD_NETNS=%s\n' "$(for id in $(osd_ids); do ns_of_osd "$id"; done | paste -sd,)"
        printf 'export CLIENT_NETNS=%s\n' "$CLIENT_NS"
    fi
    printf 'export LAB_POOL=%s\n' "$(cat "$LAB_DIR/pool" 2>/dev/null || echo replicated)"
}

cmd_status() {
    local id name pid parts=() health ids names=() n_osd=0
    ids=$(osd_ids 2>/dev/null) || ids=""
    for id in $ids; do names+=("osd.$id"); done
    for name in "${names[@]}" "mon.$MON_ID" "mgr.$MGR_ID"; do
        pid=$(daemon_pid "$name") || continue
        parts+=("$name pid $pid")
        [[ $name == osd.* ]] && n_osd=$((n_osd + 1))
    done
    if ((${#parts[@]} == 0)); then
        echo "down ($LAB_DIR)"
        return 0
    fi
    health=$(CEPH_CMD_TIMEOUT=8 cephc health 2>/dev/null | head -n1) || health="cluster not answering"
    local joined
    printf -v joined '%s, ' "${parts[@]}"
    if ((n_osd > 0 && n_osd == ${#names[@]})); then
        echo "up: $joined${health:-?} ($LAB_DIR)"
    elif ((n_osd == 0)); then
        echo "partial: ${joined}no OSD running, ${health:-?} ($LAB_DIR)"
    else
        echo "partial: ${joined}$((${#names[@]} - n_osd)) of ${#names[@]} OSDs not running, ${health:-?} ($LAB_DIR)"
    fi
}

# --no-cleanup leaves ~100 MB of 4 KiB objects (and as much BlueStore metadata)
# per 10 s run; drop them before the disk gets anywhere near full (only then, so
# that a traced run normally has no deletes). A full OSD blocks every write.
cmd_trim() {
    [[ -r $CONF ]] || die "lab is not up (no $CONF); run 'lab.sh up'"
    local used
    used=$(cephc df -f json | python3 -c 'import json,sys; print(int(100 * json.load(sys.stdin)["stats"]["total_used_raw_ratio"]))')
    if ((used >= ${LAB_CLEANUP_PCT:-50})); then
        echo "== OSD ${used}% full: removing old benchmark objects (rados -p $POOL cleanup)"
        timeout 600 rados -p "$POOL" cleanup --prefix benchmark_data >/dev/null
    fi
}

cmd_workload() {
    local secs=${1:-${SECS:-10}} threads=${2:-${THREADS:-16}}
    [[ $secs =~ ^[0-9]+$ && $threads =~ ^[0-9]+$ ]] || die "usage: lab.sh workload [SECS] [THREADS]"
    [[ -r $CONF ]] || die "lab is not up (no $CONF); run 'lab.sh up'"
    cephc -s >/dev/null 2>&1 || die "cluster not answering (CEPH_CONF=$CONF)"
    cmd_trim
    local client=()
    [[ -s $LAB_DIR/hosts ]] && client=(in_ns "$CLIENT_NS")
    echo "== rados bench -p $POOL $secs write -b 4096 -t $threads --no-cleanup"
    "${client[@]}" rados bench -p "$POOL" "$secs" write -b 4096 -t "$threads" --no-cleanup
    echo "== rados bench -p $POOL $secs rand -t $threads"
    "${client[@]}" rados bench -p "$POOL" "$secs" rand -t "$threads"
}

# cmd_osd stop|start ID: one OSD of the running lab, for recovery tests.
cmd_osd() {
    local what=${1:-} id=${2:-}
    [[ $what =~ ^(stop|start)$ && $id =~ ^[0-9]+$ ]] || die "usage: lab.sh osd stop|start ID"
    [[ -r $CONF ]] || die "lab is not up (no $CONF); run 'lab.sh up'"
    grep -qx "$id" "$LAB_DIR/osd-id" 2>/dev/null || die "no osd.$id in this lab ($(osd_ids | sed 's/^/osd./' | paste -sd' '))"
    if [[ $what == stop ]]; then
        daemon_pid "osd.$id" >/dev/null || die "osd.$id is not running"
        stop_daemon "osd.$id"
    else
        start_daemon osd "$id"
        wait_osd_active "$id"
    fi
    if [[ $what == stop ]]; then msg "osd.$id stopped"; else msg "osd.$id started"; fi
}

usage() {
    sed -n '/^# Subcommands:/,/^# Daemons/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# Serialize the commands that change a lab (two "up"s at once would fight): one lock,
# on this file, for every lab (the container labs take it too).  LAB_LOCK_HELD=1 tells
# the scripts that the caller already holds it (container.sh running lab.sh in its
# container, lab.sh stopping the container labs).
lock() {
    [[ ${LAB_LOCK_HELD:-} == 1 ]] && return 0
    exec 9<"${BASH_SOURCE[0]}"
    if ! flock -n 9; then
        msg "waiting for another lab.sh to finish"
        flock -w 300 9 || die "another lab.sh is still running after 300s"
    fi
    export LAB_LOCK_HELD=1
}

main() {
    local cmd=${1:-}
    (($#)) && shift
    # CEPH=reef|tentacle: the lab in a container (container.sh), same commands.
    if [[ ${CEPH:-pacific} != pacific && -z ${LAB_IN_CONTAINER:-} ]]; then
        case $cmd in up | env | down | workload | trim | status | osd | net-delay)
            exec bash "$(dirname "${BASH_SOURCE[0]}")/container.sh" "$CEPH" "$cmd" "$@" ;;
        esac
    fi
    case $cmd in up | down | vagrant-mon | vagrant-osd | net-delay) lock ;; esac
    case $cmd in
    install) cmd_install "$@" ;;
    up) cmd_up ;;
    env) cmd_env ;;
    down) cmd_down ;;
    workload) cmd_workload "$@" ;;
    trim) cmd_trim ;;
    osd) cmd_osd "$@" ;;
    net-delay) cmd_net_delay "$@" ;;
    status) cmd_status ;;
    vagrant-mon) cmd_vagrant_mon "$@" ;;
    vagrant-osd) cmd_vagrant_osd "$@" ;;
    *) usage ;;
    esac
}

# container.sh sources this file for its helpers: run main only when executed.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
fi
