#!/usr/bin/env bash
# A cluster of hosts on one machine, made of network namespaces, for trying
# kolo across "hosts" and for its integration tests.
#
#   scripts/netns_cluster.sh [-v] up NAME N [--rate RATE] [--subnet A.B.C.0/24] [--sshd]
#   scripts/netns_cluster.sh [-v] down NAME
#   scripts/netns_cluster.sh [-v] status NAME
#
# The wiring: one switch namespace NAME-sw holds a bridge, br0; each host
# namespace NAME-hI (I = 1..N) holds one end of a veth pair, eth1, with the
# address A.B.C.I/24; the other end, pI, is a port of br0. The pairs are made
# inside the namespaces (ip -n NAME-sw link add pI ... peer name eth1 netns
# NAME-hI), so nothing is ever added to the root namespace: no address, no
# route, no interface. Because every cluster has its own bridge, two clusters
# with the same subnet do not see each other; the subnet 10.X.0.0/24 defaults
# to an X derived from NAME only so that addresses differ between clusters
# and a mixed-up log line is easy to place.
#
# --rate RATE (100mbit, 1gbit, 10gbit, ... or none, the default) puts a tbf
# qdisc on each host's eth1, which shapes what the host sends. --sshd starts
# an sshd inside each host namespace on A.B.C.I:22 that lets root in with a
# key made for this cluster; ssh -F /tmp/NAME-ssh/ssh_config NAME-h2 reaches
# it from inside any host namespace. Each sshd runs in a UTS namespace of its
# own whose hostname is NAME-hI, so ssh sessions see their host's name (what
# ip netns exec starts keeps the machine's hostname). Name resolution: ip
# netns exec mounts /etc/netns/NS/hosts over /etc/hosts, so inside the
# cluster NAME-hI resolves to its address (in processes started with ip
# netns exec, not with ip -n).
#
# up prints one line per host, "NAME-hI A.B.C.I"; status prints the same
# two columns followed by the link state, the shaping and sshd. up on a NAME
# that exists tears it down first; an up that fails tears down what it made.
# down kills every process inside the namespaces and removes the namespaces,
# /etc/netns/NAME-* and /tmp/NAME-ssh; it never fails on what is gone.
# Needs root and iproute2; --sshd needs openssh-server (not installed here).
set -euo pipefail

program=$(basename "$0")
verbose=0

die() {
  echo "$program: $*" >&2
  exit 1
}

usage() {
  cat >&2 <<EOF
usage: $program [-v] up NAME N [--rate 100mbit|1gbit|10gbit|none] [--subnet A.B.C.0/24] [--sshd]
       $program [-v] down NAME
       $program [-v] status NAME
EOF
  exit 2
}

# Runs a command, printing it first under -v (on fd 3, the script's stderr,
# which survives a 2>/dev/null on the command).
exec 3>&2
run() {
  if ((verbose)); then echo "+ $*" >&3; fi
  local rc=0
  "$@" || rc=$?
  if ((rc != 0)); then echo "$program: failed (exit $rc): $*" >&3; fi
  return "$rc"
}

# The same for a step that may fail harmlessly (what it removes is gone).
try() {
  if ((verbose)); then echo "+ $*" >&3; fi
  "$@" 2>/dev/null || true
}

# The namespaces of cluster NAME that exist now.
cluster_namespaces() {
  local name=$1
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-(h[0-9]+|sw)$" || true
}

# The hosts' namespaces of cluster NAME, h1 first.
cluster_hosts() {
  local name=$1
  cluster_namespaces "$name" | grep -E -- "-h[0-9]+$" |
    sed -E 's/^.*-h([0-9]+)$/\1 &/' | sort -n | cut -d' ' -f2 || true
}

check_name() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$ ]] ||
    die "bad cluster name '$1': use letters, digits, '_' and '-' (at most 32, first a letter or digit)"
}

check_tools() {
  [[ $(id -u) -eq 0 ]] || die "needs root (ip netns add); run it with sudo"
  command -v ip >/dev/null || die "'ip' not found: install iproute2"
}

# Bytes per second of a tbf rate such as 100mbit, 1gbit, 10gbit, 500kbit.
rate_bytes_per_second() {
  local rate=$1 number unit
  [[ $rate =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] ||
    die "bad --rate '$rate': use e.g. 100mbit, 1gbit, 10gbit or none"
  number=${BASH_REMATCH[1]}
  ((number > 0)) || die "bad --rate '$rate': a rate above zero, or none"
  unit=${BASH_REMATCH[2]}
  case $unit in
    kbit) echo $((number * 1000 / 8)) ;;
    mbit) echo $((number * 1000000 / 8)) ;;
    gbit) echo $((number * 1000000000 / 8)) ;;
  esac
}

down() {
  local name=$1 namespaces ns pids left tries
  namespaces=$(cluster_namespaces "$name")
  # Kill first, then delete: once a namespace's name is gone its processes
  # can no longer be found, and they would keep it (and its veths) alive.
  for ns in $namespaces; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086
      try kill -KILL $pids
    fi
  done
  for ns in $namespaces; do
    for ((tries = 0; tries < 50; tries++)); do
      left=$(ip netns pids "$ns" 2>/dev/null || true)
      [[ -z $left ]] && break
      sleep 0.1
    done
    [[ -z $left ]] || echo "$program: processes still in $ns after SIGKILL: $left" >&2
    try ip netns delete "$ns"
  done
  local dir
  for dir in /etc/netns/"$name"-*; do
    [[ -d $dir && $(basename "$dir") =~ ^${name}-(h[0-9]+|sw)$ ]] && run rm -rf "$dir"
  done
  # /etc/netns itself stays: removing it when empty would race with an up
  # of another cluster making its folder there.
  [[ -e /tmp/$name-ssh ]] && run rm -rf "/tmp/$name-ssh"
  return 0
}

# Writes /tmp/NAME-ssh: keys, one sshd_config per host, the client config;
# then starts the sshds.
start_sshd() {
  local name=$1 prefix=$2 count=$3 dir="/tmp/$1-ssh" i host config
  [[ -x /usr/sbin/sshd ]] ||
    die "--sshd: /usr/sbin/sshd is missing: install openssh-server (apt-get install openssh-server)"
  command -v ssh-keygen >/dev/null ||
    die "--sshd: ssh-keygen is missing: install openssh-client"
  command -v unshare >/dev/null ||
    die "--sshd: unshare is missing: install util-linux"
  # With UsePAM no, sshd refuses even key logins to an account whose
  # password field is locked with '!'.
  if grep -q '^root:!' /etc/shadow 2>/dev/null; then
    echo "$program: warning: root's password is locked ('!' in /etc/shadow); sshd (UsePAM no) will refuse root logins" >&2
  fi
  run mkdir -p -m 700 "$dir"
  run ssh-keygen -q -N '' -t ed25519 -C "$name host key" -f "$dir/host_key"
  run ssh-keygen -q -N '' -t ed25519 -C "$name client key" -f "$dir/id_ed25519"
  # sshd refuses to start without its privilege separation directory, which
  # the openssh-server service makes at boot (tmpfiles); it is empty.
  [[ -d /run/sshd ]] || run mkdir -p -m 755 /run/sshd
  local sftp=""
  [[ -x /usr/lib/openssh/sftp-server ]] && sftp="Subsystem sftp /usr/lib/openssh/sftp-server"
  for ((i = 1; i <= count; i++)); do
    host="$name-h$i"
    config="$dir/sshd_config.h$i"
    cat >"$config" <<EOF
# sshd of $host (scripts/netns_cluster.sh)
ListenAddress $prefix.$i
Port 22
HostKey $dir/host_key
PidFile $dir/sshd.h$i.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $dir/id_ed25519.pub
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
X11Forwarding no
# Launchers start many sessions at once.
MaxStartups 200
MaxSessions 200
$sftp
EOF
    # Each sshd gets a UTS namespace of its own named after its host, so a
    # session (and whatever a launcher starts through it) sees the host's
    # name: without it every host would share the machine's hostname, and
    # mpirun or kolo would take ranks on different hosts for neighbours.
    run ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec /usr/sbin/sshd -f "$1" -E "$2"' \
      "$host" "$config" "$dir/sshd.h$i.log" ||
      die "sshd did not start in $host: $(tail -n 3 "$dir/sshd.h$i.log" 2>/dev/null)"
  done
  {
    for ((i = 1; i <= count; i++)); do
      printf 'Host %s\n  HostName %s\n' "$name-h$i" "$prefix.$i"
    done
    cat <<EOF
Host $name-h*
  User root
  Port 22
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
  ConnectTimeout 10
EOF
  } >"$dir/ssh_config"
  # sshd writes its pid file after it listens; wait for it so that a client
  # started right after up does not find the port closed.
  local tries
  for ((i = 1; i <= count; i++)); do
    for ((tries = 0; tries < 50; tries++)); do
      [[ -s $dir/sshd.h$i.pid ]] && break
      sleep 0.1
    done
    [[ -s $dir/sshd.h$i.pid ]] || die "sshd in $name-h$i wrote no pid file: see $dir/sshd.h$i.log"
  done
}

up() {
  local name=$1 count=$2
  shift 2
  local rate=none subnet="" sshd=0
  while (($#)); do
    case $1 in
      --rate) (($# >= 2)) || usage; rate=$2; shift 2 ;;
      --rate=*) rate=${1#--rate=}; shift ;;
      --subnet) (($# >= 2)) || usage; subnet=$2; shift 2 ;;
      --subnet=*) subnet=${1#--subnet=}; shift ;;
      --sshd) sshd=1; shift ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ $count =~ ^[0-9]+$ && $count -ge 1 && $count -le 250 ]] ||
    die "up: N must be a number of hosts from 1 to 250, not '$count'"
  local prefix
  if [[ -n $subnet ]]; then
    [[ $subnet =~ ^(10|172|192)\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$ ]] ||
      die "up: bad --subnet '$subnet': give a private A.B.C.0/24, e.g. 10.77.0.0/24"
    prefix=${subnet%.0/24}
  else
    prefix="10.$((16 + $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 224)).0"
  fi
  local rate_bytes=0 burst=0
  if [[ $rate != none ]]; then
    rate_bytes=$(rate_bytes_per_second "$rate")
    # The bucket must hold what the rate lets through in a few milliseconds
    # (and at least 64 KiB, one GSO packet of veth), or the shaping falls
    # below the rate: 256 KB at 1gbit, 2.5 MB at 10gbit.
    burst=$((rate_bytes / 500))
    ((burst >= 65536)) || burst=65536
  fi
  command -v tc >/dev/null || [[ $rate == none ]] || die "--rate: 'tc' not found: install iproute2"

  [[ -z $(cluster_namespaces "$name") && ! -e /tmp/$name-ssh ]] || down "$name"
  # From here on, a failure tears down what was made.
  trap 'rc=$?; if ((rc != 0)); then down "$name" >/dev/null 2>&1; fi' EXIT

  local switch="$name-sw" host i
  run ip netns add "$switch"
  run ip -n "$switch" link set lo up
  run ip -n "$switch" link add br0 type bridge
  run ip -n "$switch" link set br0 up
  for ((i = 1; i <= count; i++)); do
    host="$name-h$i"
    run ip netns add "$host"
    run ip -n "$host" link set lo up
    run ip -n "$switch" link add "p$i" type veth peer name eth1 netns "$host"
    run ip -n "$switch" link set "p$i" master br0
    run ip -n "$switch" link set "p$i" up
    run ip -n "$host" addr add "$prefix.$i/24" dev eth1
    run ip -n "$host" link set eth1 up
    if [[ $rate != none ]]; then
      run tc -n "$host" qdisc add dev eth1 root tbf rate "$rate" burst "$burst" latency 50ms
    fi
  done
  local ns
  for ns in $(cluster_namespaces "$name"); do
    run mkdir -p "/etc/netns/$ns"
    {
      printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n'
      for ((i = 1; i <= count; i++)); do printf '%s %s\n' "$prefix.$i" "$name-h$i"; done
    } >"/etc/netns/$ns/hosts"
  done
  if ((sshd)); then start_sshd "$name" "$prefix" "$count"; fi
  for ((i = 1; i <= count; i++)); do echo "$name-h$i $prefix.$i"; done
}

status() {
  local name=$1 hosts host address state shaping sshd pidfile
  hosts=$(cluster_hosts "$name")
  [[ -n $hosts ]] || die "no cluster '$name' (no namespace $name-h1)"
  for host in $hosts; do
    address=$(ip -n "$host" -4 -o addr show dev eth1 2>/dev/null | awk '{print $4}' | cut -d/ -f1 || true)
    state=$(ip -n "$host" -o link show dev eth1 2>/dev/null | grep -oE 'state [A-Z]+' | cut -d' ' -f2 || true)
    shaping=$(tc -n "$host" qdisc show dev eth1 2>/dev/null | grep -oE 'tbf .*rate [^ ]+' | awk '{print "tbf:" $NF}' || true)
    sshd=""
    pidfile="/tmp/$name-ssh/sshd.${host##*-}.pid"
    if [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then sshd="sshd"; fi
    echo "$host ${address:-none} ${state:-missing} ${shaping:-unshaped}${sshd:+ $sshd}"
  done
}

args=()
for arg in "$@"; do
  if [[ $arg == -v ]]; then verbose=1; else args+=("$arg"); fi
done
set -- "${args[@]+"${args[@]}"}"
(($# >= 2)) || usage
command=$1
name=$2
shift 2
check_name "$name"
case $command in
  up)
    (($# >= 1)) || usage
    check_tools
    up "$name" "$@"
    ;;
  down)
    (($# == 0)) || usage
    check_tools
    down "$name"
    ;;
  status)
    (($# == 0)) || usage
    check_tools
    status "$name"
    ;;
  *) usage ;;
esac
