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
#   LAB_LOG_ROOT       logs of install steps          (default /var/log/cephlat)
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
LAB_LOG_ROOT=${LAB_LOG_ROOT:-/var/log/cephlat}
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

# ---------------------------------------------------------------------------- helpers

# the multi-host lab's network (LAB_HOSTS): namespaces, the wire, link delays
# shellcheck source=labnet.sh
source "$(dirname "${BASH_SOURCE[0]}")/labnet.sh"

PROG=${0##*/}     # lab.sh, or the script that sources it (container.sh)
msg() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

# run_logged STEP CMD...: run CMD with its output in a log file; silent when it works.
# On failure: the step's name, the exit status, CMD's own last lines and the log's path.
run_logged() {
    local step=$1 log rc=0
    shift
    mkdir -p "$LAB_LOG_ROOT"
    log=$LAB_LOG_ROOT/${step//[^A-Za-z0-9._-]/_}.log
    "$@" >"$log" 2>&1 9<&- || rc=$?
    ((rc == 0)) && return 0
    {
        echo "$PROG: error: step '$step' failed (exit $rc): $*"
        echo "$PROG: last lines of $log:"
        tail -n "${LAB_LOG_TAIL:-25}" "$log" | sed 's/^/    /'
    } >&2
    exit "$rc"
}

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root"; }

check_lab_dir() {
    [[ $LAB_DIR == /* && $LAB_DIR != / && $LAB_DIR != *$'\n'* ]] ||
        die "LAB_DIR must be an absolute path other than / (got '$LAB_DIR')"
}

# ceph CLI that cannot hang: bounded connect and bounded total time.
cephc() { timeout "${CEPH_CMD_TIMEOUT:-20}" ceph --connect-timeout 5 "$@"; }

log_of() { echo "$LOG_DIR/ceph-$1.log"; }       # $1 = mon.a | mgr.x | osd.N
pidfile_of() { echo "$RUN_DIR/ceph-$1.pid"; }

# PID of daemon $1 (mon.a ...) if its pid file names a live process of the right kind.
daemon_pid() {
    local name=$1 pf pid comm
    pf=$(pidfile_of "$name")
    [[ -r $pf ]] || return 1
    pid=$(<"$pf")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "ceph-${name%%.*}" ]] || return 1
    alive "$pid" || return 1
    echo "$pid"
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != [ZX] ]]
}

# $LAB_DIR/osd-id: the lab's OSD ids, one a line (their number is the lab's OSD count).
osd_ids() { [[ -s $LAB_DIR/osd-id ]] && cat "$LAB_DIR/osd-id"; }
osd_id() { [[ -s $LAB_DIR/osd-id ]] && head -n1 "$LAB_DIR/osd-id"; }   # the first (osd.0)
osd_count() { [[ -s $LAB_DIR/osd-id ]] && wc -l <"$LAB_DIR/osd-id"; }

# Sparse disk file of the lab's OSD number $1 (0, 1, ...): osd.0 keeps the one-OSD name.
img_of() { if (($1 == 0)); then echo "$IMG"; else echo "$LAB_DIR/disk/osd-block-$1.img"; fi; }

# The number of OSDs "up" builds or keeps: LAB_OSDS, else as many as LAB_LOOPDEVS names,
# else the running (built) lab's, else 1.  Bad LAB_OSDS: one line, exit 1.
want_osds() {
    local n=$LAB_OSDS
    if [[ -z $n && -n $LAB_LOOPDEVS ]]; then
        n=$(wc -w <<<"$LAB_LOOPDEVS")
    elif [[ -z $n ]]; then
        n=1
        [[ -e $LAB_DIR/built ]] && n=$(osd_count) || true
        [[ $n =~ ^[1-9]$ ]] || n=1
    fi
    [[ $n =~ ^[0-9]{1,4}$ ]] && ((10#$n >= 1 && 10#$n <= MAX_OSDS)) ||
        die "OSDS='$n': the single-node lab runs 1 to $MAX_OSDS OSDs"
    echo $((10#$n))
}

# Pool rbd's size and min_size for N OSDs on one node (LAB_POOL_SIZE overrides the size).
set_pool_size() {
    local n=$1
    [[ -n $LAB_POOL_SIZE_SET ]] || LAB_POOL_SIZE=$((n < 3 ? n : 3))
    POOL_MIN_SIZE=$((LAB_POOL_SIZE - LAB_POOL_SIZE / 2))
}

# LAB_OSD_OPTS -> one "key=value" per line; rejects anything that is not key=value.
normalize_opts() {
    local tok
    for tok in ${LAB_OSD_OPTS:-}; do
        [[ $tok =~ ^[A-Za-z0-9_.-]+=[^=[:space:]]+$ ]] ||
            die "LAB_OSD_OPTS: '$tok' is not key=value"
        echo "$tok"
    done
}

# write_conf FSID MON_IP PUBLIC_NETWORK BLOCK_PATHS CHOOSELEAF_TYPE
# Same file for every node and role; BLOCK_PATHS may be empty (mon-only node); one path
# goes into [osd], several (space-separated, one per OSD in id order) into [osd.N].
write_conf() {
    local fsid=$1 mon_ip=$2 net=$3 chooseleaf=$5 tmp kv i blocks=()
    read -ra blocks <<<"$4"
    tmp=$(mktemp "$LAB_DIR/.ceph.conf.XXXXXX")
    {
        cat <<EOF
# Generated by vagrant/lab.sh - rewritten by "lab.sh up"; edit LAB_OSD_OPTS instead.
[global]
fsid = $fsid
mon host = v2:$mon_ip:3300
public network = $net
cluster network = $net
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = $LAB_POOL_SIZE
osd pool default min size = $POOL_MIN_SIZE
osd pool default pg autoscale mode = off
osd crush chooseleaf type = $chooseleaf
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 2
# PG states reach the mgr (and "ceph status") each second, not each 5 s: a restarted
# OSD's PGs are seen active+clean as soon as they are (lab start-up and restarts)
mgr stats period = 1
# the mon commits a change (an OSD booted or restarted, a pool made, a PG created) after
# 0.1 s, not 1 s: each of the several map epochs an OSD's (re)start takes comes sooner
paxos propose interval = 0.1
run dir = $RUN_DIR
crash dir = $LAB_DIR/crash
mon cluster log file = $LOG_DIR/\$cluster.\$channel.log
ms bind ipv6 = false

[mon]
mon data = $LAB_DIR/mon/\$cluster-\$id
mgr initial modules = iostat
admin socket = \$run_dir/\$cluster-\$name.asok
log file = $LOG_DIR/\$cluster-\$name.log
pid file = \$run_dir/\$cluster-\$name.pid

[mgr]
mgr data = $LAB_DIR/mgr/\$cluster-\$id
admin socket = \$run_dir/\$cluster-\$name.asok
log file = $LOG_DIR/\$cluster-\$name.log
pid file = \$run_dir/\$cluster-\$name.pid

[osd]
osd data = $LAB_DIR/osd/\$cluster-\$id
osd objectstore = bluestore
admin socket = \$run_dir/\$cluster-\$name.asok
log file = $LOG_DIR/\$cluster-\$name.log
pid file = \$run_dir/\$cluster-\$name.pid
# OpTracker's history (dump_historic_ops), for comparing per-op numbers (default: 20 ops)
osd op history size = 2000
osd op history duration = 900
osd op history slow op size = 200
EOF
        if [[ -n ${CRUSH_HOSTS_FIXED:-} ]]; then
            echo "# the multi-host lab: each OSD stays under its namespace's host bucket"
            echo "osd crush update on start = false"
        fi
        if ((${#blocks[@]} == 1)); then
            echo "bluestore block path = ${blocks[0]}"
        fi
        if ((${#blocks[@]})); then
            echo "bluestore block create = false"
        fi
        if [[ -n ${OPTS:-} ]]; then
            echo "# LAB_OSD_OPTS"
            while IFS= read -r kv; do
                echo "${kv%%=*} = ${kv#*=}"
            done <<<"$OPTS"
        fi
        if ((${#blocks[@]} > 1)); then
            for i in "${!blocks[@]}"; do
                printf '\n[osd.%d]\nbluestore block path = %s\n' "$i" "${blocks[i]}"
            done
        fi
    } >"$tmp"
    chmod 644 "$tmp"
    if cmp -s "$tmp" "$CONF"; then rm -f "$tmp"; else mv -f "$tmp" "$CONF"; fi
    chmod 644 "$CONF"
}

make_dirs() {
    mkdir -p "$LAB_DIR"
    touch "$MARKER"
    mkdir -p "$RUN_DIR" "$LOG_DIR" "$LAB_DIR/crash" "$LAB_DIR/mon" "$LAB_DIR/mgr" \
        "$LAB_DIR/osd" "$LAB_DIR/disk"
}

# ----------------------------------------------------------------------------- daemons

# start_daemon TYPE ID: no-op when already running.  The daemon forks and its parent
# exits once the daemon has initialised, so a non-zero status means it failed to start.
# no_inherited_fds CMD...: run CMD with every fd above 2 closed.
no_inherited_fds() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec $fd>&-"
        done
        exec "$@"
    )
}

start_daemon() {
    local type=$1 id=$2
    daemon_pid "$type.$id" >/dev/null && return 0
    msg "starting $type.$id"
    # The daemon must not inherit (and keep) any lock: lab.sh's own, or a
    # caller's (`flock FILE make lab` leaves its lock open on an fd).
    local ns=() host
    # an OSD of the multi-host lab starts in its host's network (labnet.sh)
    [[ $type == osd ]] && host=$(ns_of_osd "$id") && ns=(nsenter "--net=/run/netns/$host" --)
    no_inherited_fds "${ns[@]}" "ceph-$type" -c "$CONF" -i "$id" >>"$LOG_DIR/ceph-$type.$id.start.log" 2>&1 ||
        die "ceph-$type -i $id failed to start; see $(log_of "$type.$id") and $LOG_DIR/ceph-$type.$id.start.log"
    local i
    for ((i = 0; i < 50; i++)); do
        daemon_pid "$type.$id" >/dev/null && return 0
        sleep 0.1
    done
    die "$type.$id did not write its pid file; see $(log_of "$type.$id")"
}

# start_daemons TYPE ID...: start_daemon for each ID, all at once (several OSDs).
start_daemons() {
    local type=$1 id jobs=() j failed=0
    shift
    if (($# == 1)); then
        start_daemon "$type" "$1"
        return
    fi
    for id; do
        start_daemon "$type" "$id" &
        jobs+=($!)
    done
    for j in "${jobs[@]}"; do
        wait "$j" || failed=1
    done
    ((failed == 0)) || exit 1      # start_daemon has said why
}

# stop_pids PID...: SIGTERM to all, wait up to STOP_TIMEOUT, then SIGKILL.
STOPPED=()
stop_pids() {
    local pid i pids=() left=()
    for pid; do
        kill -TERM "$pid" 2>/dev/null || continue
        STOPPED+=("$pid")
        pids+=("$pid")
    done
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        left=()
        for pid in "${pids[@]}"; do
            alive "$pid" && left+=("$pid")
        done
        ((${#left[@]})) || return 0
        sleep 0.1
    done
    for pid in "${left[@]}"; do
        msg "pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "${left[@]}"; do
        for ((i = 0; i < 50; i++)); do
            alive "$pid" || continue 2
            sleep 0.1
        done
        msg "warning: pid $pid still exists after SIGKILL"
    done
}
stop_pid() { stop_pids "$1"; }

# Exited daemons were re-parented to PID 1; give it a moment to reap them so that no
# <defunct> entry is left behind either (bounded: 10 s).
wait_reaped() {
    local pid i
    for pid in "${STOPPED[@]}"; do
        for ((i = 0; i < 100; i++)); do
            [[ -e /proc/$pid ]] || break
            sleep 0.1
        done
    done
}

stop_daemon() { stop_daemons "$1"; }   # stop_daemon mon.a

stop_daemons() {  # stop_daemons osd.0 osd.1 ...: all at once
    local name pid pids=()
    for name; do
        if pid=$(daemon_pid "$name"); then
            msg "stopping $name (pid $pid)"
            pids+=("$pid")
        fi
    done
    ((${#pids[@]} == 0)) || stop_pids "${pids[@]}"
    for name; do
        rm -f "$(pidfile_of "$name")"
    done
}

# Daemons of this lab without a usable pid file (e.g. a crash between fork and pid
# file): found by their command line naming this lab's ceph.conf - never by name alone.
stray_pids() {
    local p cmd
    for p in /proc/[0-9]*; do
        [[ $(cat "$p/comm" 2>/dev/null) =~ ^ceph-(mon|mgr|osd)$ ]] || continue
        alive "${p#/proc/}" || continue
        cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
        [[ " $cmd " == *" $CONF "* ]] && echo "${p#/proc/}"
    done
    return 0
}

# ------------------------------------------------------------------------ cluster state

# Prints nothing and succeeds when the cluster looks ready: N OSDs up and in, every PG
# active+clean (a clean PG trimming snapshots or scrubbing, active+clean+snaptrim, is
# ready too: a lab that deleted an image with snapshots shows it), pool rbd present.  Otherwise prints the reason and fails.
cluster_not_ready_reason() {
    local want_osds=$1 json
    json=$(CEPH_CMD_TIMEOUT=10 cephc status -f json 2>/dev/null) || { echo "ceph status failed"; return 1; }
    python3 -c '
import json, sys
s = json.loads(sys.argv[1]); want = int(sys.argv[2])
om = s.get("osdmap", {}); om = om.get("osdmap", om)
pm = s.get("pgmap", {})
n, up, inn = om.get("num_osds", 0), om.get("num_up_osds", 0), om.get("num_in_osds", 0)
if n < want or up < n or inn < n:
    sys.exit("osds: %d total, %d up, %d in (want %d)" % (n, up, inn, want))
total = pm.get("num_pgs", 0)
# active+clean, or clean and only trimming snapshots or scrubbing (never stale: its
# OSD has not reported it since a restart)
ok = lambda st: st >= {"active", "clean"} and \
    st <= {"active", "clean", "snaptrim", "snaptrim_wait", "scrubbing", "deep"}
clean = sum(x["count"] for x in pm.get("pgs_by_state", [])
            if ok(set(x["state_name"].split("+"))))
if total == 0 or clean != total:
    states = ", ".join("%d %s" % (x["count"], x["state_name"]) for x in pm.get("pgs_by_state", []))
    sys.exit("pgs: %d/%d active+clean (%s)" % (clean, total, states or "no stats yet"))
' "$json" "$want_osds" 2>&1 || return 1
}

# wait_ready N_OSDS: bounded poll until ready and the pool answers a rados listing.
wait_ready() {
    local want=$1 deadline reason=""
    deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if reason=$(cluster_not_ready_reason "$want"); then
            if timeout 10 rados -p "$POOL" ls >/dev/null 2>&1; then
                return 0
            fi
            reason="rados -p $POOL ls failed"
        fi
        sleep 0.5
    done
    die "cluster not ready after ${READY_TIMEOUT}s: $reason; logs: $LOG_DIR/ (OSD log $(log_of "osd.$(osd_id || echo 0)"))"
}

wait_mon() {   # wait_mon SECS
    local deadline=$((SECONDS + $1))
    while ((SECONDS < deadline)); do
        CEPH_CMD_TIMEOUT=8 cephc mon stat >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}

# Wait until the OSD process reports "active" on its admin socket (it has booted and
# seen itself up in the osdmap), i.e. a freshly (re)started OSD is really serving.
wait_osd_active() {
    local id=$1 deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if timeout 5 ceph daemon "osd.$id" status 2>/dev/null | grep -q '"state": "active"'; then
            return 0
        fi
        daemon_pid "osd.$id" >/dev/null || die "osd.$id exited; see $(log_of "osd.$id")"
        sleep 0.5
    done
    die "osd.$id not active after ${READY_TIMEOUT}s; see $(log_of "osd.$id")"
}

# --------------------------------------------------------------- building blocks shared
# by the single-node and the multi-node paths

# create_mon FSID MON_IP: monmap + mkfs + start mon.a and mgr.x.
create_mon() {
    local fsid=$1 ip=$2
    monmaptool --create --clobber --add "$MON_ID" "v2:$ip:3300" --fsid "$fsid" \
        "$LAB_DIR/monmap" >/dev/null
    ceph-mon -c "$CONF" --mkfs -i "$MON_ID" --monmap "$LAB_DIR/monmap" ||
        die "ceph-mon --mkfs failed; see $(log_of "mon.$MON_ID")"
    mkdir -p "$LAB_DIR/mgr/ceph-$MGR_ID"
    start_daemon mon "$MON_ID"
    wait_mon 30 || die "mon.$MON_ID not answering; see $(log_of "mon.$MON_ID")"
    start_daemon mgr "$MGR_ID"
}

# create_pool: pool rbd with PG_NUM PGs and LAB_POOL_SIZE replicas (no OSD needed yet).
create_pool() {
    if ! cephc osd pool ls | grep -qx "$POOL"; then
        cephc osd pool create "$POOL" "$PG_NUM" "$PG_NUM" >/dev/null 2>&1 ||
            die "ceph osd pool create $POOL failed"
    fi
    cephc osd pool set "$POOL" size "$LAB_POOL_SIZE" --yes-i-really-mean-it >/dev/null 2>&1 ||
        die "ceph osd pool set $POOL size $LAB_POOL_SIZE failed"
    if ((POOL_MIN_SIZE > 1)); then
        cephc osd pool set "$POOL" min_size "$POOL_MIN_SIZE" >/dev/null 2>&1 ||
            die "ceph osd pool set $POOL min_size $POOL_MIN_SIZE failed"
    fi
    cephc osd pool application enable "$POOL" rbd >/dev/null 2>&1 || true
}

# create_osds DEVICE...: per DEVICE a new OSD id (recorded in $LAB_DIR/osd-id, in order),
# then BlueStore mkfs on every device at once, crush entries, start.
create_osds() {
    local dev uuid id host i ids=() uuids=() mkfs=()
    : >"$LAB_DIR/osd-id"
    ((${#OSD_HOSTS[@]} == 0)) || : >"$LAB_DIR/hosts"
    for dev; do
        uuid=$(cat /proc/sys/kernel/random/uuid)
        id=$(cephc osd new "$uuid") || die "ceph osd new failed"
        [[ $id =~ ^[0-9]+$ ]] || die "ceph osd new returned '$id'"
        echo "$id" >>"$LAB_DIR/osd-id"
        ((${#OSD_HOSTS[@]} == 0)) || echo "$id ${OSD_HOSTS[${#ids[@]}]}" >>"$LAB_DIR/hosts"
        mkdir -p "$LAB_DIR/osd/ceph-$id"
        ids+=("$id")
        uuids+=("$uuid")
    done
    i=0
    for dev; do
        msg "mkfs osd.${ids[i]} on $dev"
        ceph-osd -c "$CONF" -i "${ids[i]}" --mkfs --osd-uuid "${uuids[i]}" >/dev/null 2>&1 &
        mkfs+=($!)
        i=$((i + 1))
    done
    for i in "${!ids[@]}"; do
        wait "${mkfs[i]}" || die "ceph-osd --mkfs failed; see $(log_of "osd.${ids[i]}")"
    done
    for id in "${ids[@]}"; do
        host=$(ns_of_osd "$id") || host=$(hostname -s)
        cephc osd crush add "osd.$id" 1 root=default "host=$host" >/dev/null 2>&1 ||
            die "ceph osd crush add osd.$id failed"
    done
    start_daemons osd "${ids[@]}"
}

# rbd pool init + image, once enough OSDs are up for the pool to accept writes.
init_rbd() {
    if ! timeout 30 rbd pool init "$POOL" >/dev/null 2>&1; then
        msg "warning: 'rbd pool init $POOL' failed; enabled the rbd application instead"
        cephc osd pool application enable "$POOL" rbd >/dev/null 2>&1 || true
    fi
    if ! timeout 20 rbd info "$POOL/$IMAGE" >/dev/null 2>&1; then
        timeout 30 rbd create --size 1024 "$POOL/$IMAGE" 2>/dev/null ||
            timeout 20 rbd info "$POOL/$IMAGE" >/dev/null 2>&1 ||   # another node won the race
            die "rbd create $POOL/$IMAGE failed"
    fi
}

# apply_osd_opts ID...: restart the OSDs when the conf they were started with differs
# from the current one; start those not running.  $LAB_DIR/osd-opts.applied holds the
# LAB_OSD_OPTS set the running OSDs were started with.
apply_osd_opts() {
    local id applied="" running=() started=()
    [[ -r $LAB_DIR/osd-opts.applied ]] && applied=$(<"$LAB_DIR/osd-opts.applied")
    if [[ $applied != "$OPTS" ]]; then
        for id; do
            daemon_pid "osd.$id" >/dev/null || continue
            msg "LAB_OSD_OPTS changed ('${applied//$'\n'/ }' -> '${OPTS//$'\n'/ }'): restarting osd.$id"
            running+=("osd.$id")
        done
        ((${#running[@]} == 0)) || stop_daemons "${running[@]}"
    fi
    for id; do
        daemon_pid "osd.$id" >/dev/null || started+=("$id")
    done
    ((${#started[@]})) || return 0
    start_daemons osd "${started[@]}"
    printf '%s' "$OPTS" >"$LAB_DIR/osd-opts.applied"
    for id in "${started[@]}"; do
        wait_osd_active "$id"
    done
}

# is_lab_img FILE: FILE is one of this lab's OSD disk files (disk/osd-block*.img).
is_lab_img() {
    local f
    f=$(readlink -m "${1%% (deleted)}")
    [[ ${f%/*} == "$(readlink -m "$LAB_DIR/disk")" && ${f##*/} == osd-block*.img ]]
}

# Release this lab's loop devices: the recorded ones ($LAB_DIR/loopdev, one a line) and
# any other backed by one of our files.  Devices the caller passed in (LAB_LOOPDEVS) are
# the caller's to detach.
detach_loops() {
    local dev back img
    if [[ -n $LAB_LOOPDEVS ]]; then
        rm -f "$LAB_DIR/loopdev"
        return 0
    fi
    {
        [[ -r $LAB_DIR/loopdev ]] && cat "$LAB_DIR/loopdev"
        for img in "$LAB_DIR"/disk/osd-block*.img; do
            [[ -e $img ]] && losetup -j "$img" -nO NAME 2>/dev/null
        done
        true
    } | sort -u | while read -r dev; do
        [[ -n $dev ]] || continue
        back=$(losetup -nO BACK-FILE "$dev" 2>/dev/null) || continue
        if is_lab_img "$back"; then
            msg "detaching $dev"
            losetup -d "$dev"
        fi
    done
    rm -f "$LAB_DIR/loopdev"
}

# The loop devices this lab uses (space-separated, OSD id order), when each is still
# what was recorded: over img_of N (attached here), or the caller's LAB_LOOPDEVS.
lab_loopdevs() {
    local devs=() i back
    [[ -s $LAB_DIR/loopdev ]] || return 1
    mapfile -t devs <"$LAB_DIR/loopdev"
    if [[ -n $LAB_LOOPDEVS ]]; then
        [[ "${devs[*]}" == "$(echo $LAB_LOOPDEVS)" ]] || return 1
        for i in "${!devs[@]}"; do
            [[ -b ${devs[i]} ]] || return 1
        done
    else
        for i in "${!devs[@]}"; do
            back=$(losetup -nO BACK-FILE "${devs[i]}" 2>/dev/null) || return 1
            [[ $(readlink -f "${back%% (deleted)}") == "$(readlink -f "$(img_of "$i")")" ]] || return 1
        done
    fi
    echo "${devs[*]}"
}

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

# ------------------------------------------------------------------------- multi-node

# Cluster fsid shared by all Vagrant nodes: LAB_FSID (set by the Vagrantfile, generated
# on the host) or the file $LAB_SHARED/fsid in the synced folder; the mon node creates
# the file if neither exists (works when /vagrant is a two-way share).
shared_fsid() {
    local create=${1:-}
    if [[ -n ${LAB_FSID:-} ]]; then
        echo "$LAB_FSID"
    elif [[ -s $LAB_SHARED/fsid ]]; then
        cat "$LAB_SHARED/fsid"
    elif [[ $create == create ]]; then
        mkdir -p "$LAB_SHARED"
        tee "$LAB_SHARED/fsid" </proc/sys/kernel/random/uuid
    else
        die "no fsid: set LAB_FSID or provide $LAB_SHARED/fsid"
    fi
}

net_of() { echo "${LAB_PUBLIC_NETWORK:-${1%.*}.0/24}"; }   # 192.168.56.10 -> 192.168.56.0/24

valid_ip() { [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "not an IPv4 address: '$1'"; }

cmd_vagrant_mon() {
    local ip=${1:-} fsid
    [[ -n $ip ]] || die "usage: lab.sh vagrant-mon IP"
    valid_ip "$ip"
    need_root
    check_lab_dir
    cmd_install
    OPTS=$(normalize_opts)
    fsid=$(shared_fsid create)
    if [[ -e $LAB_DIR/built && $(cat "$LAB_DIR/fsid" 2>/dev/null) == "$fsid" ]]; then
        write_conf "$fsid" "$ip" "$(net_of "$ip")" "" 1
        start_daemon mon "$MON_ID"      # after a reboot: restart from the kept data
        start_daemon mgr "$MGR_ID"
    else
        cmd_down
        make_dirs
        echo "$fsid" >"$LAB_DIR/fsid"
        write_conf "$fsid" "$ip" "$(net_of "$ip")" "" 1
        create_mon "$fsid" "$ip"
        create_pool                     # PGs go active once enough OSD nodes join
        touch "$LAB_DIR/built"
    fi
    # Copy of the conf for the host's convenience (only if the shared folder is writable).
    if mkdir -p "$LAB_SHARED" 2>/dev/null; then
        cp "$CONF" "$LAB_SHARED/ceph.conf" 2>/dev/null || true
    fi
    msg "mon.$MON_ID and mgr.$MGR_ID up at $ip (fsid $fsid)"
}

# DISK "auto": the only whole disk with no partitions, not mounted, not in use and
# either blank or holding a BlueStore label.  An explicit DISK gets the same checks.
pick_disk() {
    local want=$1 d cands=()
    for d in $(lsblk -dnpo NAME,TYPE | awk '$2 == "disk" && $1 !~ /zram|nbd|\/ram/ {print $1}'); do
        if [[ $want != auto && $(readlink -f "$want") != "$d" ]]; then continue; fi
        [[ $(lsblk -no RO -d "$d" | tr -d ' ') == 0 ]] || continue
        [[ $(lsblk -nro NAME "$d" | wc -l) -eq 1 ]] || continue          # no partitions
        [[ -z $(lsblk -nro MOUNTPOINT "$d" | tr -d '[:space:]') ]] || continue
        if blkid -p "$d" >/dev/null 2>&1; then                             # has a signature
            [[ $(head -c 22 "$d" 2>/dev/null | tr -d '\0') == "bluestore block device" ]] || continue
        fi
        cands+=("$d")
    done
    ((${#cands[@]} == 1)) ||
        die "DISK '$want': expected exactly one blank unpartitioned disk, found ${#cands[@]} (${cands[*]:-none}); see lsblk"
    echo "${cands[0]}"
}

cmd_vagrant_osd() {
    local mon_ip=${1:-} want=${2:-} fsid disk id n_up
    [[ -n $mon_ip && -n $want ]] || die "usage: lab.sh vagrant-osd MON_IP DISK|auto"
    valid_ip "$mon_ip"
    need_root
    check_lab_dir
    cmd_install
    OPTS=$(normalize_opts)
    fsid=$(shared_fsid)
    if [[ -e $LAB_DIR/built && $(cat "$LAB_DIR/fsid" 2>/dev/null) == "$fsid" ]] && id=$(osd_id); then
        disk=$(<"$LAB_DIR/disk-path")
        write_conf "$fsid" "$mon_ip" "$(net_of "$mon_ip")" "$disk" 1
        wait_mon 300 || die "mon at $mon_ip not reachable"
        apply_osd_opts "$id"            # restarts after a reboot or an option change
    else
        cmd_down
        disk=$(pick_disk "$want")
        make_dirs
        touch "$LAB_DIR/role-osd"
        echo "$fsid" >"$LAB_DIR/fsid"
        echo "$disk" >"$LAB_DIR/disk-path"
        write_conf "$fsid" "$mon_ip" "$(net_of "$mon_ip")" "$disk" 1
        msg "waiting for the mon at $mon_ip"
        wait_mon 300 || die "mon at $mon_ip not reachable after 300s"
        msg "wiping the start of $disk"
        dd if=/dev/zero of="$disk" bs=1M count=100 oflag=direct status=none
        create_osds "$disk"
        id=$(osd_id)
        printf '%s' "$OPTS" >"$LAB_DIR/osd-opts.applied"
        wait_osd_active "$id"
        touch "$LAB_DIR/built"
    fi
    # The last OSD node to join makes the pool writable: initialise rbd there.
    n_up=$(cephc osd stat -f json | python3 -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])')
    if ((n_up >= LAB_POOL_SIZE)); then
        READY_TIMEOUT=${LAB_READY_TIMEOUT:-180} wait_ready "$n_up"
        init_rbd
    else
        msg "$n_up OSD(s) up, pool size $LAB_POOL_SIZE: rbd init left to the next OSD node"
    fi
    msg "osd.$id up on $disk"
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
