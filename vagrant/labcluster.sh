# labcluster.sh - part of lab.sh (sourced by it, never run): the cluster's state (ready,
# mon up, OSDs active) and the building blocks its subcommands share: mon, pool, OSDs,
# rbd image, OSD options, the loop devices.
# shellcheck shell=bash

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
