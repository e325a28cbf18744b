#!/usr/bin/env bash
# Builds kolo's libFuzzer targets (fuzz/, one per parser of bytes from
# outside the process) with clang under ASan and UBSan in build-fuzz, and
# runs each for a bounded time from its seed corpus (fuzz/corpus/<target>)
# and its past crashes (fuzz/regressions/<target>). Fails on any crash,
# leak, sanitizer report or input slower than the per-input timeout, and
# leaves the input that did it in build-fuzz/artifacts/<target>/. Prints
# each target's executions, their rate and the coverage reached.
#
#   scripts/fuzz.sh                        every target, 20 s each
#   KOLO_FUZZ_SECONDS=120 scripts/fuzz.sh  longer runs
#   scripts/fuzz.sh hostfile_fuzzer        only the targets named
#
# The inputs a run finds go to build-fuzz/corpus/<target>, never into the
# tree: fuzz/corpus holds the small seeds fuzz/make_corpus.py writes.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(clang libclang-rt-14-dev llvm-14 cmake ninja-build ccache)
scripts/install_missing.sh "${packages[@]}"

seconds="${KOLO_FUZZ_SECONDS:-20}"
# An input that takes longer than this is a hang: every target's servers
# answer or close within their own timeouts (the store's handshake: 5 s).
per_input_timeout=15
build=build-fuzz
symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer

# LibTorch from the project's environment, as scripts/setup.sh finds it:
# the dataset loaders' fuzzer links it.
python="$(scripts/setup_python.sh)"
torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKOLO_SANITIZE=address -DKOLO_BUILD_FUZZERS=ON \
  -DKOLO_WITH_TORCH=ON -DCMAKE_PREFIX_PATH="$torch_prefix" \
  -DKOLO_WITH_CUDA=OFF -DKOLO_WITH_GLOO=OFF -DKOLO_WITH_MPI=OFF \
  -DKOLO_BUILD_TESTS=OFF -DKOLO_BUILD_BENCH=OFF -DKOLO_BUILD_TOOLS=OFF \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  > "$build/configure.log" || { cat "$build/configure.log"; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^ *kolo_add_fuzzer(\([a-z_]*\) .*/\1/p' fuzz/CMakeLists.txt)
fi
cmake --build "$build" --target "${targets[@]}" -- -j2

export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The sanitizer runs' suppressions: third-party libraries only.
export LSAN_OPTIONS="suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0"

failed=()
printf '%-30s %12s %10s %8s %8s\n' target runs "runs/s" cov ft
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target/"
  log="$build/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  inputs=("$corpus" "fuzz/corpus/$target")
  [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
  options=(-max_total_time="$seconds" -timeout="$per_input_timeout"
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts")
  [ -f "fuzz/$target.dict" ] && options+=(-dict="fuzz/$target.dict")
  status=0
  "$build/fuzz/$target" "${options[@]}" "${inputs[@]}" > "$log" 2>&1 || status=$?
  # A target that crashed at once may have printed no statistics.
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  printf '%-30s %12s %10s %8s %8s\n' "$target" "${runs:-?}" "${rate:-?}" \
    "$(echo "$coverage" | awk '{print $2}')" "$(echo "$coverage" | awk '{print $4}')"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    echo "fuzz: $target failed (exit $status); its log, $log, ends:" >&2
    tail -40 "$log" >&2
    ls "$artifacts" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: every target ran ${seconds} s without a finding"
