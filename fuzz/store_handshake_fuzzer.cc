// Fuzzes the TCP store's handshake as an unauthenticated peer sees it
// (store/tcp_store.cc): the server's challenge is read, then the input is
// sent as is, length prefix included, as the client's hello. Whatever the
// bytes, the server must refuse or admit without a memory error, and must
// close the connection once the peer has stopped sending.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz/loopback.h"
#include "store/tcp_store.h"

namespace {

kolo::TcpStoreServer& Server() {
  return kolo::fuzz::StartedOnce<kolo::TcpStoreServer>([] {
    return kolo::TcpStoreServer::Start("127.0.0.1", 0,
                                       "fuzzing-store-secret-0123456789");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::LoopbackClient client(Server().port());
  // The challenge: a length, then that many bytes.
  uint32_t length = 0;
  std::string challenge;
  if (client.Receive(&length, sizeof(length)) &&
      length <= kolo::kStoreMaxHandshakeBytes) {
    challenge.resize(length);
    client.Receive(challenge.data(), length);
  }
  client.Send(data, size);
  client.FinishAndDrain();
  return 0;
}
