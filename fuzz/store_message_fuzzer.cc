// Fuzzes the TCP store's requests as an authenticated client sends them
// (store/tcp_store.cc's Answer, behind message_auth.cc's Open): the harness
// completes the handshake with the job secret, then sends each request the
// input holds. Most are sealed with the session's key, so the server parses
// their bodies; some go out unsealed or with their length prefix taken from
// the input, which the server must refuse and close on.
//
// A get or a wait for a key nobody sets blocks for its timeout, as it
// should; the harness caps the timeout it finds in a well-formed get or
// wait at a few milliseconds, so such an input is not reported as a hang.
//
// Each input gets a store of its own: what one input's requests leave in
// the store (a counter near INT64_MAX) must not decide what the next one
// finds, or a finding could not be replayed from its input alone.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz/loopback.h"
#include "store/message_auth.h"
#include "store/tcp_store.h"

namespace {

constexpr char kSecret[] = "fuzzing-store-secret-0123456789";
// The store's commands (tcp_store.cc) whose requests end in a timeout.
constexpr uint8_t kGet = 3;
constexpr uint8_t kWait = 5;
constexpr int64_t kCappedTimeoutMs = 5;

std::string Frame(const std::string& body) {
  const uint32_t length = static_cast<uint32_t>(body.size());
  return std::string(reinterpret_cast<const char*>(&length), sizeof(length)) +
         body;
}

std::string Field(const std::string& s) {
  const uint32_t length = static_cast<uint32_t>(s.size());
  return std::string(reinterpret_cast<const char*>(&length), sizeof(length)) +
         s;
}

bool ReceiveFrame(kolo::fuzz::LoopbackClient& client, std::string* body) {
  uint32_t length = 0;
  if (!client.Receive(&length, sizeof(length)) || length > (1u << 20))
    return false;
  body->resize(length);
  return client.Receive(body->data(), length);
}

// Skips a length-prefixed string at `*at`; false past the end.
bool SkipString(const std::string& body, size_t* at) {
  uint32_t length = 0;
  if (body.size() - *at < sizeof(length)) return false;
  std::memcpy(&length, body.data() + *at, sizeof(length));
  *at += sizeof(length);
  if (body.size() - *at < length) return false;
  *at += length;
  return true;
}

// Where a get's or a wait's timeout lies in `body`, or 0 when it has none.
size_t TimeoutOffset(const std::string& body) {
  size_t at = 1;
  if (body[0] == kGet) {
    if (!SkipString(body, &at)) return 0;
  } else if (body[0] == kWait) {
    int64_t count = 0;
    if (body.size() - at < sizeof(count)) return 0;
    std::memcpy(&count, body.data() + at, sizeof(count));
    at += sizeof(count);
    for (int64_t i = 0; i < count; ++i) {
      if (!SkipString(body, &at)) return 0;
    }
  } else {
    return 0;
  }
  return body.size() - at >= sizeof(int64_t) ? at : 0;
}

void CapTimeout(std::string* body) {
  if (body->empty()) return;
  const size_t at = TimeoutOffset(*body);
  if (at == 0) return;
  int64_t timeout_ms = 0;
  std::memcpy(&timeout_ms, body->data() + at, sizeof(timeout_ms));
  if (timeout_ms > kCappedTimeoutMs || timeout_ms < 0) {
    std::memcpy(body->data() + at, &kCappedTimeoutMs, sizeof(timeout_ms));
  }
}

// The client's side of the handshake (message_auth.h); the authenticator
// that seals this connection's requests, or null if the server refused.
std::unique_ptr<kolo::MessageAuthenticator> Authenticate(
    kolo::fuzz::LoopbackClient& client) {
  std::string challenge;
  if (!ReceiveFrame(client, &challenge)) return nullptr;
  // kChallenge, then the magic and the server's nonce, each a string.
  size_t at = 1;
  kolo::HandshakeTranscript transcript;
  const auto read = [&](std::string* out) {
    const size_t start = at;
    if (!SkipString(challenge, &at)) return false;
    *out = challenge.substr(start + 4, at - start - 4);
    return true;
  };
  if (!read(&transcript.magic) || !read(&transcript.server_nonce))
    kolo::fuzz::HarnessFailure("fuzz: the store's challenge is malformed");
  transcript.client_nonce = std::string(kolo::kStoreNonceBytes, 'n');
  transcript.rank = -1;     // a client, not a rank: no failure is recorded
  std::string hello(1, 1);  // kHello
  hello += Field(transcript.magic) + Field(transcript.client_nonce);
  hello.append(reinterpret_cast<const char*>(&transcript.rank),
               sizeof(transcript.rank));
  hello += Field(kolo::ClientProof(kSecret, transcript));
  std::string answer;
  if (!client.Send(Frame(hello)) || !ReceiveFrame(client, &answer))
    kolo::fuzz::HarnessFailure("fuzz: the store refused the job secret");
  return std::make_unique<kolo::MessageAuthenticator>(
      kolo::SessionKey(kSecret, transcript), kolo::Direction::kClientToServer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto server = kolo::TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  if (!server.ok()) kolo::fuzz::HarnessFailure("fuzz: start the store");
  kolo::fuzz::LoopbackClient client((*server)->port());
  std::unique_ptr<kolo::MessageAuthenticator> auth = Authenticate(client);
  FuzzedDataProvider input(data, size);
  while (input.remaining_bytes() > 0) {
    const uint8_t how = input.ConsumeIntegral<uint8_t>();
    std::string body = input.ConsumeRandomLengthString(4096);
    std::string frame;
    if (how < 224) {  // sealed: the server parses the request
      CapTimeout(&body);
      frame = Frame(auth->Seal(body));
    } else if (how < 240) {  // unsealed: the tag cannot match
      frame = Frame(body);
    } else {  // raw bytes, length prefix included
      frame = body;
    }
    std::string reply;
    if (!client.Send(frame) || how >= 240 || !ReceiveFrame(client, &reply))
      break;
  }
  client.FinishAndDrain();
  return 0;
}
