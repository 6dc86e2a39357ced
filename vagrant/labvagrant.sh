# labvagrant.sh - part of lab.sh (sourced by it, never run): the multi-node lab's
# subcommands, run by Vagrant's provisioners in each VM (vagrant-mon, vagrant-osd).
# shellcheck shell=bash

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
