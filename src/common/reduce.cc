// Picks the reduction kernels for this CPU once, at first use.
#include "common/reduce.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/config.h"

namespace kolo {

namespace {

// The best supported set, or the one KOLO_REDUCE_ISA names (a bad value
// is reported by Init; until then the best set runs).
ReduceIsa ChooseIsa() {
  const std::vector<ReduceIsa> supported = SupportedReduceIsas();
  const std::string wanted = ReadReduceIsa(ProcessEnvironment()).value_or("");
  for (ReduceIsa isa : supported) {
    if (wanted == ReduceIsaName(isa)) return isa;
  }
  return supported.back();
}

// The active set; Init may change it between jobs, never during a
// collective, so relaxed loads suffice.
std::atomic<int>& ActiveIsaSlot() {
  static std::atomic<int> slot{static_cast<int>(ChooseIsa())};
  return slot;
}

}  // namespace

ReduceIsa ActiveReduceIsa() {
  return static_cast<ReduceIsa>(
      ActiveIsaSlot().load(std::memory_order_relaxed));
}

Status SetActiveReduceIsa(const std::string& name) {
  if (name.empty()) {
    ActiveIsaSlot().store(static_cast<int>(SupportedReduceIsas().back()),
                          std::memory_order_relaxed);
    return Status::Ok();
  }
  std::string supported;
  for (ReduceIsa isa : SupportedReduceIsas()) {
    if (name == ReduceIsaName(isa)) {
      ActiveIsaSlot().store(static_cast<int>(isa), std::memory_order_relaxed);
      return Status::Ok();
    }
    supported +=
        std::string(supported.empty() ? "" : ", ") + ReduceIsaName(isa);
  }
  return InvalidArgument("reduction kernels '" + name +
                         "' are not available on this CPU (it supports " +
                         supported + ")");
}

namespace {
ReduceKernels Active() { return KernelsFor(ActiveReduceIsa()); }
}  // namespace

void ReduceInto(DataType type, ReduceOp op, void* out, const void* a,
                const void* b, int64_t count) {
  Active().reduce(type, op, out, a, b, count);
}

void DivideInPlace(DataType type, void* data, int64_t count, int64_t divisor) {
  Active().divide(type, data, data, count, divisor);
}

void DivideInto(DataType type, void* out, const void* in, int64_t count,
                int64_t divisor) {
  Active().divide(type, out, in, count, divisor);
}

}  // namespace kolo
