// Fuzzes the tcp engine's admission of connections (transport/tcp_mesh.cc):
// any process that can reach a rank's listener while the mesh forms may
// connect and say anything. The harness forms a mesh of two ranks in this
// process; before rank 1 connects, one to three strangers connect to rank
// 0's listener (its address is in the store, under addr/0), each sends
// bytes from the input, and some stay open. The mesh must still form, and
// rank 0 must admit rank 1, not a stranger.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fuzz/loopback.h"
#include "store/memory_store.h"
#include "transport/tcp_mesh.h"

namespace {

kolo::StatusOr<std::unique_ptr<kolo::TcpMesh>> FormRank(int32_t rank,
                                                        kolo::Store* store) {
  kolo::TcpMesh::Options options;
  options.rank = rank;
  options.size = 2;
  options.timeout = std::chrono::seconds(5);
  // The mesh admits ranks by proof of the job secret; strangers lack it.
  options.job_secret = "fuzz-job-secret-of-32-characters";
  return kolo::TcpMesh::Connect(options, store);
}

void Check(const kolo::StatusOr<std::unique_ptr<kolo::TcpMesh>>& mesh,
           const char* who) {
  if (mesh.ok()) return;
  std::fprintf(stderr, "fuzz: %s did not join the mesh: %s\n", who,
               mesh.status().message().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  kolo::MemoryStore store;
  kolo::StatusOr<std::unique_ptr<kolo::TcpMesh>> rank0 =
      kolo::Internal("not formed");
  std::thread listener([&] { rank0 = FormRank(0, &store); });
  auto address = store.Get("addr/0", std::chrono::seconds(10));
  if (!address.ok()) kolo::fuzz::HarnessFailure("fuzz: rank 0's address");
  const int port = std::stoi(address->substr(address->rfind(':') + 1));

  std::vector<std::unique_ptr<kolo::fuzz::LoopbackClient>> strangers;
  const int count = input.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < count; ++i) {
    const bool stays_open = input.ConsumeBool();
    const std::string bytes = input.ConsumeRandomLengthString(256);
    auto stranger = std::make_unique<kolo::fuzz::LoopbackClient>(port);
    stranger->Send(bytes);
    if (stays_open) strangers.push_back(std::move(stranger));
  }
  kolo::StatusOr<std::unique_ptr<kolo::TcpMesh>> rank1 = FormRank(1, &store);
  listener.join();
  Check(rank0, "rank 0");
  Check(rank1, "rank 1");
  return 0;
}
