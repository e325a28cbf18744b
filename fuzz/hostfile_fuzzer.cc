// Fuzzes kolorun's host lists (tools/kolorun/hosts.cc): a hostfile's
// contents and -H's value are whatever the user wrote. Either must parse
// or fail with kInvalidArgument; a parsed host has at least one slot.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hosts.h"

namespace {

void CheckHosts(
    const kolo::StatusOr<std::vector<kolo::kolorun::HostSlots>>& hosts) {
  if (!hosts.ok()) {
    if (hosts.status().code() != kolo::StatusCode::kInvalidArgument)
      std::abort();
    return;
  }
  for (const kolo::kolorun::HostSlots& host : *hosts) {
    if (host.slots < 1) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  CheckHosts(kolo::kolorun::ParseHostfile(text, "HOSTS"));
  CheckHosts(kolo::kolorun::ParseHostList(text));
  return 0;
}
