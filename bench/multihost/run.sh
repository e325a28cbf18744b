#!/usr/bin/env bash
# The multi-host benchmarks of issue 15 in one command, on a cluster of
# network namespaces (scripts/netns_cluster.sh) on this machine.
#
#   sudo bench/multihost/run.sh [-o DIR] [--rates 1gbit,10gbit]
#       [--layouts 2x2,4x1] [--backend ENGINE] [--no-train | --train-only]
#       [--quick]
#       [--build DIR]
#
# For each link rate (tbf on every host's eth1) and each layout (2 hosts x 2
# ranks, 4 hosts x 1 rank) it brings a cluster up with sshd in every host,
# runs, each from inside the first host's namespace:
#
#   link         kolo-bench link under kolorun: plain TCP's round trip and
#                stream bandwidth between two hosts, the ceiling
#   kolo         kolo-bench collectives allreduce under kolorun on kolo's
#                default cross-host engine (or --backend), with the raw
#                engines beside it (--peer tcp,gloo, or gloo where the bench
#                has no tcp peer); at 2x2 once more with the hierarchical
#                allreduce off (KOLO_HIERARCHICAL_ALLREDUCE=0; the first run
#                leaves it to kolo, which turns it on there)
#   mpirun       the same bench under mpirun started across the namespaces
#                over ssh, with --peer mpi: Open MPI's MPI_Allreduce
#   torch        bench/peers/torch_collectives.py under kolorun: PyTorch's
#                gloo allreduce
#   train (2x2)  kolo-train --benchmark-steps under kolorun against
#                torch_ddp.py --from-env under torchrun in every namespace,
#                lenet (Fashion-MNIST, batch 128, 30 steps) and resnet18
#                (synthetic 3x32x32, batch 32, 10 steps), gradients sent
#                as they are, in fp16 and in bf16 (DDP has no bf16 hook on
#                CPU, so its bf16 row is absent); and the same 4 workers
#                through one parameter server on h2 (kolorun --servers 1,
#                kolo-train --parameter-servers 1), synchronous and
#                asynchronous
#
# and tears the cluster down. Every sweep is split in two runs: 4 KiB to
# 1 MiB with many iterations (small messages are noisy and cheap) and 4 MiB
# to 256 MiB with few (a 256 MiB allreduce takes seconds at 1 Gbit/s).
# Sizes step by 4, which keeps the 16, 64 and 256 MiB rows the issue asks
# for.
#
# Everything lands in DIR (default /tmp/kolo-multihost-DATE): one folder per
# configuration ("1gbit-2x2") with each step's JSON and log, steps.tsv
# (step, exit status, seconds) and meta.json (rate, layout, hosts, load),
# then summarize.py's tables (summary.txt, summary.json) and, per
# configuration, kolo-bench report's page (report.html). A step that fails
# is recorded and the run goes on, so one broken piece costs only its own
# figures; the exit status is 0 only when every step passed. The cluster
# is torn down on every exit, failures and Ctrl-C included. --quick
# checks the harness in a few minutes: sizes up to 16 MiB, 3 training steps.
#
# Needs root, iproute2, openssh-server and -client, util-linux (unshare),
# the build's kolorun, kolo-bench and kolo-train, the project's .venv, and for the
# mpirun step openmpi-bin. All "hosts" share this machine's cores, so the
# figures describe the network and the software on a shared CPU, not a
# real cluster: the summary records the load average around each
# configuration.
# cleanup and torchrun_everywhere are called indirectly (trap, step):
# shellcheck disable=SC2317
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
program=$(basename "$0")

out=""
rates="1gbit,10gbit"
layouts="2x2,4x1"
backend=""
train=1
train_only=0
quick=0
build="$repo/build"
name=kbench

die() {
  echo "$program: $*" >&2
  exit 1
}

usage() {
  sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while (($#)); do
  case $1 in
    -o) (($# >= 2)) || usage; out=$2; shift 2 ;;
    --rates) (($# >= 2)) || usage; rates=$2; shift 2 ;;
    --layouts) (($# >= 2)) || usage; layouts=$2; shift 2 ;;
    --backend) (($# >= 2)) || usage; backend=$2; shift 2 ;;
    --no-train) train=0; shift ;;
    --train-only) train_only=1; shift ;;
    --quick) quick=1; shift ;;
    --build) (($# >= 2)) || usage; build=$2; shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown argument '$1'" ;;
  esac
done

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces); run it with sudo"
kolorun=$build/tools/kolorun/kolorun
bench=$build/tools/kolo-bench/kolo-bench
kolo_train=$build/tools/kolo-train/kolo-train
for tool in "$kolorun" "$bench"; do
  [[ -x $tool ]] || die "$tool is missing: cmake --build $build --target kolorun kolo-bench"
done
if ((train)) && [[ ! -x $kolo_train ]]; then
  die "$kolo_train is missing: build it, or pass --no-train"
fi
python="$repo/.venv/bin/python"  # the project's torch 2.11 (scripts/setup.sh)
"$python" -c 'import torch' 2>/dev/null || die "$python cannot import torch: run scripts/setup.sh"
netns="$repo/scripts/netns_cluster.sh"
fashion=/usr/share/datasets/fashion-mnist

[[ -n $out ]] || out="/tmp/kolo-multihost-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The ranks see the machine's own environment through kolorun and mpirun;
# kolo's engine comes from --backend alone, never from the caller's shell.
unset KOLO_BACKEND KOLO_HIERARCHICAL_ALLREDUCE
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

failed=0
background=()
cleanup() {
  local pid
  for pid in "${background[@]+"${background[@]}"}"; do
    kill "$pid" 2>/dev/null || true
  done
  "$netns" down "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$out/run.log"; }

# step DIR NAME LIMIT COMMAND...: runs COMMAND (a program, under a
# timeout of LIMIT seconds, or a function of this script, which bounds its
# own commands) with its output shown and kept in DIR/NAME.log, records its
# status, and never stops the run.
step() {
  local dir=$1 step_name=$2 limit=$3
  shift 3
  local start rc=0 bound=(timeout --kill-after=10 "$limit")
  declare -F "$1" >/dev/null && bound=()
  start=$(date +%s)
  log "$step_name: $*"
  set +e
  "${bound[@]+"${bound[@]}"}" "$@" 2>&1 | tee "$dir/$step_name.log"
  rc=${PIPESTATUS[0]}
  set -e
  printf '%s\t%s\t%s\n' "$step_name" "$rc" $(($(date +%s) - start)) >>"$dir/steps.tsv"
  if ((rc != 0)); then
    failed=1
    log "$step_name: FAILED (exit $rc), see $dir/$step_name.log"
  fi
  return 0
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Which raw engines kolo-bench can time beside kolo: tcp joins gloo once
# the bench knows it (a two-rank job on loopback says).
peers=gloo
if timeout 60 "$kolorun" -np 2 --backend gloo "$bench" collectives --ops allreduce \
  -b 1K -e 1K -n 1 -w 0 --peer tcp >/dev/null 2>&1; then
  peers=tcp,gloo
fi
log "output in $out; rates $rates; layouts $layouts; kolo engine ${backend:-the default}; raw peers $peers; load $(loadavg)"

run_configuration() {
  local rate=$1 layout=$2
  local hosts_count ranks_per_host
  case $layout in
    2x2) hosts_count=2 ranks_per_host=2 ;;
    4x1) hosts_count=4 ranks_per_host=1 ;;
    *) die "unknown layout '$layout' (2x2 or 4x1)" ;;
  esac
  local dir="$out/$rate-$layout"
  mkdir -p "$dir"
  : >"$dir/steps.tsv"
  log "== $rate $layout: cluster up"
  local lines
  lines=$("$netns" up "$name" "$hosts_count" --rate "$rate" --sshd) ||
    die "cluster $name did not come up"
  local h1_address hostlist="" mpi_hosts="" i
  h1_address=$(awk 'NR == 1 {print $2}' <<<"$lines")
  for ((i = 1; i <= hosts_count; i++)); do
    hostlist+="${hostlist:+,}$name-h$i:$ranks_per_host"
  done
  mpi_hosts=$hostlist
  local load_before
  load_before=$(loadavg)
  local started
  started=$(date +%s)

  local h1=(ip netns exec "$name-h1")
  local job=("${h1[@]}" "$kolorun" -H "$hostlist" --remote-shell 'ip netns exec {host}')
  [[ -n $backend ]] && job+=(--backend "$backend")
  local small=(-b 4K -e 1M -f 4 -n 50 -w 10)
  local large=(-b 4M -e 256M -f 4 -n 3 -w 1)
  ((quick)) && small=(-b 4K -e 1M -f 16 -n 10 -w 2) large=(-b 4M -e 16M -f 4 -n 2 -w 1)
  # At 2x2 the first run asks for the hierarchical allreduce (kolo's
  # default there anyway), the second turns it off.
  local first=()
  [[ $layout == 2x2 ]] && first=(--env KOLO_HIERARCHICAL_ALLREDUCE=1)

  if ((!train_only)); then
    step "$dir" link 120 "${job[@]}" "$bench" link --json "$dir/link.json"

    local part sizes
    for part in small large; do
      if [[ $part == small ]]; then sizes=("${small[@]}"); else sizes=("${large[@]}"); fi
      step "$dir" "kolo-$part" 600 "${job[@]}" "${first[@]+"${first[@]}"}" "$bench" \
        collectives --ops allreduce "${sizes[@]}" --peer "$peers" --json "$dir/kolo-$part.json"
      if [[ $layout == 2x2 ]]; then
        step "$dir" "kolo-flat-$part" 600 "${job[@]}" --env KOLO_HIERARCHICAL_ALLREDUCE=0 \
          "$bench" collectives --ops allreduce "${sizes[@]}" --json "$dir/kolo-flat-$part.json"
      fi
      if command -v mpirun >/dev/null; then
        # mpirun reaches the other namespaces through their sshds; each
        # "host" offers as many slots as it has ranks, so Open MPI does not
        # know that all of them share two cores and would spin while it
        # waits: mpi_yield_when_idle is what it would set itself, had it
        # known the nodes were oversubscribed. kolo's own runtime rides on
        # MPI here too (no store address); the figures compared are --peer
        # mpi's.
        # shellcheck disable=SC2054  # commas inside --mca values
        local mpi=("${h1[@]}" mpirun --allow-run-as-root -H "$mpi_hosts"
          --mca plm_rsh_args "-F /tmp/$name-ssh/ssh_config"
          --mca btl self,vader,tcp --mca btl_tcp_if_include eth1
          --mca oob_tcp_if_include eth1 --mca mpi_yield_when_idle 1
          -x PATH -x LD_LIBRARY_PATH)
        step "$dir" "mpirun-$part" 600 "${mpi[@]}" "$bench" collectives --ops allreduce \
          "${sizes[@]}" --peer mpi --json "$dir/mpirun-$part.json"
      else
        printf 'mpirun-%s\tskipped\t0\n' "$part" >>"$dir/steps.tsv"
      fi
      # Rank 0 hosts torch's rendezvous on h1; a port per run, so the second
      # never waits for the first one's socket to leave TIME_WAIT.
      local port=29510
      [[ $part == large ]] && port=29511
      step "$dir" "torch-$part" 600 "${job[@]}" --env GLOO_SOCKET_IFNAME=eth1 \
        "$python" "$repo/bench/peers/torch_collectives.py" "${sizes[@]}" \
        --master-addr "$h1_address" --master-port "$port" --json "$dir/torch-$part.json"
    done
  fi

  if ((train)) && [[ $layout == 2x2 ]]; then
    local model compression port=29600 kolo_flags ddp_flags steps warmup
    for model in lenet resnet18; do
      if [[ $model == lenet ]]; then
        if [[ -d $fashion ]]; then
          kolo_flags=(--dataset fashion-mnist)
          ddp_flags=(--dataset fashion-mnist)
        else
          kolo_flags=(--dataset synthetic --image-size 28)
          ddp_flags=(--dataset synthetic --channels 3 --image-size 28)
        fi
        steps=30 warmup=3
        ((quick)) && steps=3 warmup=1
        kolo_flags+=(--batch-size 128 --benchmark-steps "$steps" --benchmark-warmup "$warmup")
        ddp_flags+=(--batch-size 128 --iters "$steps" --warmup "$warmup")
      else
        steps=10 warmup=2
        ((quick)) && steps=3 warmup=1
        kolo_flags=(--dataset synthetic --image-size 32 --batch-size 32
          --benchmark-steps "$steps" --benchmark-warmup "$warmup")
        ddp_flags=(--dataset synthetic --channels 3 --image-size 32
          --batch-size 32 --iters "$steps" --warmup "$warmup")
      fi
      for compression in none fp16 bf16; do
        step "$dir" "train-kolo-$model-$compression" 600 "${job[@]}" "$kolo_train" \
          --model "$model" "${kolo_flags[@]}" --threads 1 --compression "$compression" \
          --json "$dir/train-kolo-$model-$compression.json"
        [[ $compression == bf16 ]] && continue
        port=$((port + 1))
        step "$dir" "train-ddp-$model-$compression" 600 torchrun_everywhere \
          "$hosts_count" "$ranks_per_host" "$h1_address" "$port" "$dir/train-ddp-$model-$compression" \
          "$repo/bench/peers/torch_ddp.py" --from-env --model "$model" "${ddp_flags[@]}" \
          --threads 1 --compression "$compression" --json "$dir/train-ddp-$model-$compression.json"
      done
      # The same 4 workers through one parameter server, a fifth process
      # on h2: the studies' parameter server against allreduce, across hosts.
      local mode
      for mode in sync async; do
        step "$dir" "train-ps-$model-$mode" 600 "${h1[@]}" "$kolorun" \
          -H "$name-h1:$ranks_per_host,$name-h2:$((ranks_per_host + 1))" \
          --remote-shell 'ip netns exec {host}' -np 4 --servers 1 "$kolo_train" \
          --model "$model" "${kolo_flags[@]}" --threads 1 --parameter-servers 1 \
          --ps-mode "$mode" --json "$dir/train-ps-$model-$mode.json"
      done
    done
  fi

  local load_after
  load_after=$(loadavg)
  "$python" - "$dir/meta.json" "$rate" "$layout" "$hostlist" "$h1_address" \
    "$load_before" "$load_after" "$(($(date +%s) - started))" "$backend" "$peers" <<'EOF'
import json, sys
path, rate, layout, hosts, h1, before, after, seconds, backend, peers = sys.argv[1:]
json.dump({"rate": rate, "layout": layout, "hosts": hosts, "h1_address": h1,
           "loadavg_before": before, "loadavg_after": after,
           "seconds": int(seconds), "backend": backend or "default",
           "raw_peers": peers.split(",")}, open(path, "w"), indent=2)
EOF
  log "== $rate $layout: done in $(($(date +%s) - started)) s, load $load_before -> $load_after"
  "$netns" down "$name"
}

# torchrun_everywhere HOSTS PER_HOST MASTER_ADDR PORT LOGPREFIX SCRIPT ARGS...:
# torchrun's multi-node form, one per namespace, node 0 in h1, each bounded
# by 600 s; waits for all and fails if any failed. The other nodes' output
# goes to LOGPREFIX.nodeI.log. Under Debian's torch 1.13 and Python 3.11, torchrun
# crashes on its default --redirects 0 and --tee 0 (it cannot parse 0), so
# both are 1: stdout is teed, stderr goes straight through.
torchrun_everywhere() {
  local count=$1 per_host=$2 master=$3 port=$4 prefix=$5
  shift 5
  local node pids=() rc=0
  local common=(timeout --kill-after=10 600 env GLOO_SOCKET_IFNAME=eth1
    "$python" -m torch.distributed.run
    --nnodes "$count" --nproc_per_node "$per_host" --master_addr "$master"
    --master_port "$port" --redirects 1 --tee 1)
  for ((node = 1; node < count; node++)); do
    ip netns exec "$name-h$((node + 1))" "${common[@]}" --node_rank "$node" "$@" \
      >"$prefix.node$node.log" 2>&1 &
    pids+=($!)
    background+=($!)
  done
  ip netns exec "$name-h1" "${common[@]}" --node_rank 0 "$@" || rc=$?
  local pid
  for pid in "${pids[@]+"${pids[@]}"}"; do
    if ! wait "$pid" && ((rc == 0)); then rc=1; fi
  done
  return "$rc"
}

started=$(date +%s)
IFS=, read -r -a rate_list <<<"$rates"
IFS=, read -r -a layout_list <<<"$layouts"
for rate in "${rate_list[@]}"; do
  for layout in "${layout_list[@]}"; do
    run_configuration "$rate" "$layout"
  done
done
log "all configurations done in $(($(date +%s) - started)) s"

"$python" "$here/summarize.py" "$out" | tee "$out/summary.txt" || failed=1
for dir in "$out"/*/; do
  if [[ -f $dir/report-input.json ]]; then
    "$bench" report "$dir/report-input.json" -o "$dir/report.html" >/dev/null ||
      log "kolo-bench report could not draw $dir"
  fi
done
log "summary: $out/summary.txt; pages: $out/*/report.html"
exit "$failed"
