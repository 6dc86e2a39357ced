# labnet.sh - the multi-host lab's network, sourced by lab.sh (LAB_HOSTS=N).
#
# A host is a network namespace of this machine: osdlab-h1 .. osdlab-hN, each with
# its OSDs (LAB_OSDS_PER_HOST), and osdlab-client for the client. The mon and the mgr
# stay in this machine's own namespace (the "mon host"). Every namespace has one
# device, labnet0, with its address on the lab's own subnet ($LAB_SUBNET.0/24: the
# mon host .1, host K .1K, the client .100), and every device is a TUN end of one
# process, labwire (vagrant/labwire.c): the wire. It delays each packet on its way out
# of a host by that host's link delay (LAB_NET_DELAY, LAB_NET_JITTER), as netem on each
# host's link would (this kernel has no sch_netem and loads no modules). A one-way trip
# between two hosts is one link delay; the mon host's link has none.
#
# What differs from real hosts: one kernel (one scheduler, one page cache, the same two
# CPUs for every host), one clock (no offset between hosts' timestamps), and the wire
# is a process (it adds its own ~40 us per packet, more when the CPUs are busy: what the
# lab measures at LAB_NET_DELAY=0 is the baseline).

NS_PREFIX=osdlab-
CLIENT_NS=${NS_PREFIX}client
LAB_SUBNET=${LAB_SUBNET:-10.77.0}
MON_HOST_IP=$LAB_SUBNET.1
CLIENT_IP=$LAB_SUBNET.100
NET_DEV=labnet0
WIRE_PID=$LAB_DIR/labwire.pid
WIRE_CTL=$LAB_DIR/labwire.ctl
MAX_HOSTS=3
MAX_OSDS_PER_HOST=2

host_ns() { echo "${NS_PREFIX}h$1"; }      # host_ns 2 -> osdlab-h2
host_ip() { echo "$LAB_SUBNET.1$1"; }      # host_ip 2 -> 10.77.0.12

# usecs DELAY: "0", "500us", "0.5ms", "1ms", "2" (ms) -> microseconds; bad: one line, exit 1.
usecs() {
    local v=$1 what=$2
    [[ $v =~ ^([0-9]+(\.[0-9]+)?)(us|ms)?$ ]] ||
        die "$what='$v': a delay such as 0.5ms, 500us or 0"
    python3 -c 'import sys; v, u = float(sys.argv[1]), sys.argv[2]; print(round(v if u == "us" else v * 1000))' \
        "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]:-ms}"
}

# want_hosts: LAB_HOSTS (2-3), else the built lab's hosts (when LAB_OSDS is not set),
# else 0 (the single-node lab).
want_hosts() {
    local n=${LAB_HOSTS:-}
    if [[ -z $n ]]; then
        n=0
        [[ -z $LAB_OSDS && -e $LAB_DIR/built && -s $LAB_DIR/net ]] && n=$(cut -d' ' -f1 "$LAB_DIR/net")
        echo "$n"
        return
    fi
    [[ $n =~ ^[0-9]$ ]] && ((n >= 2 && n <= MAX_HOSTS)) ||
        die "HOSTS='$n': the multi-host lab runs 2 to $MAX_HOSTS hosts"
    [[ -z ${LAB_OSDS:-} ]] || die "HOSTS and OSDS together: use OSDS_PER_HOST with HOSTS"
    echo "$n"
}

# keep_running_net: `make lab` without HOSTS= on a built multi-host lab keeps it as it
# is: its OSDs per host and link delays are the defaults (sets LAB_OSDS_PER_HOST,
# LAB_NET_DELAY, LAB_NET_JITTER where unset).
keep_running_net() {
    local per delay jitter
    [[ -z ${LAB_HOSTS:-} && -z $LAB_OSDS && -e $LAB_DIR/built && -s $LAB_DIR/net ]] || return 0
    read -r _ per delay jitter _ <"$LAB_DIR/net"
    LAB_OSDS_PER_HOST=${LAB_OSDS_PER_HOST:-$per}
    LAB_NET_DELAY=${LAB_NET_DELAY:-${delay}us}
    LAB_NET_JITTER=${LAB_NET_JITTER:-${jitter}us}
}

want_per_host() {
    local n=${LAB_OSDS_PER_HOST:-1}
    [[ $n =~ ^[0-9]$ ]] && ((n >= 1 && n <= MAX_OSDS_PER_HOST)) ||
        die "OSDS_PER_HOST='$n': 1 to $MAX_OSDS_PER_HOST OSDs on each host"
    echo "$n"
}

# net_spec HOSTS PER_HOST: what the lab's network is (saved in $LAB_DIR/net; another
# spec rebuilds the lab): "HOSTS PER_HOST DELAY_US JITTER_US SUBNET".
net_spec() {
    local d j
    d=$(usecs "${LAB_NET_DELAY:-0}" LAB_NET_DELAY) || exit 1
    j=$(usecs "${LAB_NET_JITTER:-0}" LAB_NET_JITTER) || exit 1
    echo "$1 $2 $d $j $LAB_SUBNET"
}

# The host (namespace) of OSD id $1, from $LAB_DIR/hosts ("ID NS" lines); fails on the
# single-node lab.
ns_of_osd() {
    [[ -s $LAB_DIR/hosts ]] || return 1
    awk -v id="$1" '$1 == id {print $2; f = 1} END {exit !f}' "$LAB_DIR/hosts"
}

# in_ns NS CMD...: CMD in namespace NS's network (only: the file system stays this
# machine's, so the pid files, logs and admin sockets are where lab.sh expects them).
in_ns() {
    local ns=$1
    shift
    nsenter --net="/run/netns/$ns" -- "$@"
}

wire_alive() {
    local pid
    [[ -s $WIRE_PID ]] || return 1
    pid=$(<"$WIRE_PID")
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == labwire ]] && alive "$pid"
}

# The wire's binary: LAB_WIRE, else built here from labwire.c next to this script.
wire_bin() {
    local src bin
    if [[ -n ${LAB_WIRE:-} ]]; then
        [[ -x $LAB_WIRE ]] || die "LAB_WIRE=$LAB_WIRE is not an executable"
        echo "$LAB_WIRE"
        return
    fi
    src=$(dirname "${BASH_SOURCE[0]}")/labwire.c
    bin=$LAB_DIR/labwire
    if [[ ! -x $bin || $src -nt $bin ]]; then
        command -v cc >/dev/null || die "no C compiler to build $src (apt-get install gcc)"
        cc -O2 -Wall -o "$bin" "$src" || die "building $src failed"
    fi
    echo "$bin"
}

# LAB_NET_EXTERNAL=1 (a container lab, vagrant/container.sh): the network is made and
# removed by the caller, outside; here the namespaces are only used (net_up checks they
# are there, net_down leaves them, net_ok looks at the namespaces only: the wire is a
# process of the caller's PID namespace).
net_external() { [[ -n ${LAB_NET_EXTERNAL:-} ]]; }

# net_namespaces HOSTS: the namespaces of a lab of HOSTS hosts, the client's last.
net_namespaces() {
    local k
    for ((k = 1; k <= $1; k++)); do host_ns "$k"; done
    echo "$CLIENT_NS"
}

# net_up HOSTS DELAY_US JITTER_US: the namespaces, the wire and the addresses.
net_up() {
    local hosts=$1 delay=$2 jitter=$3 k ns links=() bin i
    if net_external; then
        for ns in $(net_namespaces "$hosts"); do
            [[ -e /run/netns/$ns ]] || die "network namespace $ns is missing (LAB_NET_EXTERNAL: the caller makes it)"
        done
        return 0
    fi
    net_down
    bin=$(wire_bin)
    for ((k = 1; k <= hosts; k++)); do
        links+=("$(host_ns "$k")=$(host_ip "$k"),$delay,$jitter")
    done
    links+=("$CLIENT_NS=$CLIENT_IP,$delay,$jitter")
    for i in "${links[@]}"; do
        ns=${i%%=*}
        ip netns add "$ns" || die "ip netns add $ns failed"
        ip -n "$ns" link set lo up
    done
    rm -f "$WIRE_PID" "$WIRE_CTL"
    : >"$WIRE_CTL"
    msg "network: ${#links[@]} namespaces on $LAB_SUBNET.0/24 through labwire (link delay ${delay} us, jitter ${jitter} us)"
    # setsid -f: the wire in a session of its own, and nothing of lab.sh waiting for it
    # (a background job of this shell would keep its lock open)
    no_inherited_fds setsid -f "$bin" "$WIRE_PID" "$WIRE_CTL" "-=$MON_HOST_IP,0,0" "${links[@]}" \
        >>"$LOG_DIR/labwire.log" 2>&1 </dev/null
    for ((i = 0; i < 50; i++)); do
        [[ -s $WIRE_PID ]] && break
        sleep 0.1
    done
    wire_alive || die "labwire did not start; see $LOG_DIR/labwire.log"
    net_addr - "$MON_HOST_IP"
    for i in "${links[@]}"; do
        ns=${i%%=*}
        i=${i#*=}
        net_addr "$ns" "${i%%,*}"
    done
}

# net_addr NS|- ADDR: the address on the namespace's labnet0, the device up, no IPv6
# (its router solicitations would only be dropped by the wire).
net_addr() {
    local ns=$1 addr=$2 ipn=(ip)
    [[ $ns == - ]] || ipn=(ip -n "$ns")
    if [[ $ns == - ]]; then
        sysctl -qw "net.ipv6.conf.$NET_DEV.disable_ipv6=1" 2>/dev/null || true
    else
        in_ns "$ns" sysctl -qw "net.ipv6.conf.$NET_DEV.disable_ipv6=1" 2>/dev/null || true
    fi
    "${ipn[@]}" addr add "$addr/24" dev "$NET_DEV" || die "ip addr add $addr on $ns failed"
    "${ipn[@]}" link set "$NET_DEV" up || die "ip link set $NET_DEV up on $ns failed"
}

# net_down: the wire stopped (its devices go with it), the lab's namespaces deleted
# (found by name: osdlab-*), whether or not LAB_DIR still says what they were.
net_down() {
    local pid ns
    net_external && return 0
    for pid in $(pgrep -x labwire || true); do
        [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *" $WIRE_CTL "* ]] || continue
        stop_pid "$pid"
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        [[ $ns == "$NS_PREFIX"* ]] || continue
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -f "$WIRE_PID"
}

# net_ok: the built lab's network is there (after a reboot it is not: rebuild).
net_ok() {
    local ns
    net_external || wire_alive || return 1
    for ns in $(cut -d' ' -f2 "$LAB_DIR/hosts") "$CLIENT_NS"; do
        [[ -e /run/netns/$ns ]] || return 1
    done
}

# cmd_net_delay HOST|client|all DELAY [JITTER]: change a link's delay on the running
# lab (HOST: h1, osdlab-h1 or 1).
cmd_net_delay() {
    local who=${1:-} d j ns line out=()
    [[ -n $who && -n ${2:-} ]] || die "usage: lab.sh net-delay HOST|client|all DELAY [JITTER]"
    [[ -s $LAB_DIR/net ]] && wire_alive || die "no multi-host lab is up (make lab HOSTS=3)"
    d=$(usecs "$2" DELAY) || exit 1
    j=$(usecs "${3:-0}" JITTER) || exit 1
    case $who in
    all) ns=all ;;
    client | "$CLIENT_NS") ns=$CLIENT_NS ;;
    [1-9]) ns=$(host_ns "$who") ;;
    h[1-9]) ns=$NS_PREFIX$who ;;
    *) ns=$who ;;
    esac
    [[ $ns == all || -e /run/netns/$ns ]] || die "no host '$who' in this lab ($(cut -d' ' -f2 "$LAB_DIR/hosts" | sort -u | paste -sd' ') $CLIENT_NS)"
    # the control file holds every link's current setting; the wire rereads it on SIGHUP
    while read -r line; do
        [[ -n $line && ${line%% *} != "$ns" ]] && out+=("$line")
    done <"$WIRE_CTL"
    if [[ $ns == all ]]; then
        out=()
        for ns in $(cut -d' ' -f2 "$LAB_DIR/hosts" | sort -u) "$CLIENT_NS"; do
            out+=("$ns $d $j")
        done
    else
        out+=("$ns $d $j")
    fi
    printf '%s\n' "${out[@]}" >"$WIRE_CTL"
    kill -HUP "$(<"$WIRE_PID")"
    msg "link delay of $who: $d us (jitter $j us)"
}

# "; hosts: osd.0 on osdlab-h1 (10.77.0.11), ..." for the lab's summary line.
hosts_summary() {
    [[ -s $LAB_DIR/hosts ]] || return 0
    local id ns parts=()
    while read -r id ns; do
        parts+=("osd.$id on $ns")
    done <"$LAB_DIR/hosts"
    local joined
    printf -v joined '%s, ' "${parts[@]}"
    echo "; ${joined%, }; client in $CLIENT_NS"
}
