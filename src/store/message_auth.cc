#include "store/message_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <utility>

#include "common/hex.h"
#include "common/logging.h"

namespace kolo {
namespace {

void AppendU64(std::string& out, uint64_t v) {
  // Little-endian byte by byte, so the tag does not depend on the host.
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void AppendField(std::string& out, const std::string& field) {
  AppendU64(out, field.size());
  out += field;
}

std::string Labelled(const std::string& secret, const char* label,
                     const HandshakeTranscript& t) {
  std::string data;
  AppendField(data, label);
  AppendField(data, t.magic);
  AppendField(data, t.server_nonce);
  AppendField(data, t.client_nonce);
  AppendU64(data, static_cast<uint64_t>(t.rank));
  return HmacSha256(secret, data);
}

const char* DirectionName(Direction d) {
  return d == Direction::kClientToServer ? "client" : "server";
}

}  // namespace

StatusOr<std::string> RandomNonce() {
  std::string nonce(kStoreNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()),
                 static_cast<int>(nonce.size())) != 1) {
    return Internal("OpenSSL's RAND_bytes could not draw " +
                    std::to_string(kStoreNonceBytes) +
                    " random bytes for a store nonce");
  }
  return nonce;
}

StatusOr<std::string> NewJobSecret() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return Internal(
        "OpenSSL's RAND_bytes could not draw 16 random bytes for a job "
        "secret");
  }
  return HexEncode(bytes, sizeof(bytes));
}

std::string HmacSha256(const std::string& key, const std::string& data) {
  unsigned char tag[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // HMAC() fails only when libcrypto cannot allocate; nothing to recover.
  const unsigned char* done =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           tag, &length);
  KOLO_CHECK(done != nullptr) << "OpenSSL's HMAC-SHA256 failed";
  KOLO_CHECK_EQ(length, kStoreTagBytes);
  return std::string(reinterpret_cast<const char*>(tag), length);
}

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ClientProof(const std::string& secret,
                        const HandshakeTranscript& transcript) {
  return Labelled(secret, "client proof", transcript);
}

std::string ServerProof(const std::string& secret,
                        const HandshakeTranscript& transcript) {
  return Labelled(secret, "server proof", transcript);
}

std::string SessionKey(const std::string& secret,
                       const HandshakeTranscript& transcript) {
  return Labelled(secret, "session key", transcript);
}

MessageAuthenticator::MessageAuthenticator(std::string session_key,
                                           Direction outgoing)
    : session_key_(std::move(session_key)),
      outgoing_(outgoing),
      incoming_(outgoing == Direction::kClientToServer
                    ? Direction::kServerToClient
                    : Direction::kClientToServer) {}

std::string MessageAuthenticator::Seal(const std::string& body) {
  return body + Tag(outgoing_, sent_++, body);
}

StatusOr<std::string> MessageAuthenticator::Open(const std::string& message) {
  const uint64_t sequence = received_++;
  const std::string what = "message " + std::to_string(sequence) +
                           " from the " + DirectionName(incoming_);
  if (failed_) {
    return Unauthenticated(what +
                           " follows one that failed authentication; the "
                           "connection is no longer trusted");
  }
  if (message.size() < kStoreTagBytes) {
    failed_ = true;
    return Unauthenticated(what + " is " + std::to_string(message.size()) +
                           " bytes, shorter than its authentication tag");
  }
  std::string body = message.substr(0, message.size() - kStoreTagBytes);
  if (!ConstantTimeEqual(message.substr(body.size()),
                         Tag(incoming_, sequence, body))) {
    failed_ = true;
    return Unauthenticated(what +
                           " failed authentication (altered, replayed or "
                           "reordered in transit, or sent without the job "
                           "secret)");
  }
  return body;
}

std::string MessageAuthenticator::Tag(Direction direction, uint64_t sequence,
                                      const std::string& body) const {
  std::string data;
  data.reserve(1 + 8 + body.size());
  data.push_back(static_cast<char>(direction));
  AppendU64(data, sequence);
  data += body;
  return HmacSha256(session_key_, data);
}

}  // namespace kolo
