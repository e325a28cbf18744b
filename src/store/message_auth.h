// Message authentication for the TCP store (store/tcp_store.h): the proofs
// of the handshake, the session key, and the tag on every later message.
//
// Everything is HMAC-SHA256 (OpenSSL's libcrypto) keyed by the job secret or
// by a key derived from it, so the secret itself never travels.
//
// Handshake. The server sends a fresh random nonce, the client answers with
// its own nonce, its rank and a proof; the server answers with its proof.
// Both proofs and the session key are MACs of the same transcript (the
// protocol's magic, both nonces, the rank), each under its own label:
//
//   client proof = HMAC(secret, "client proof" | transcript)
//   server proof = HMAC(secret, "server proof" | transcript)
//   session key  = HMAC(secret, "session key"  | transcript)
//
// Every field is length-prefixed, so no two different transcripts encode
// to the same bytes. A fresh server nonce makes a recorded client proof
// worthless on any other connection; a fresh client nonce does the same for
// a recorded server proof; the labels keep a proof from being reflected as
// the other side's.
//
// Messages. After the handshake each message is its body followed by
//
//   tag = HMAC(session key, direction | sequence | body)
//
// where the sequence counts the messages sent so far in that direction
// (implicit: both ends count, it is not sent). A message replayed within its
// connection, reordered, reflected back to its sender, or carried into
// another connection (another session key) fails its tag, as does a body
// with any byte changed. The body itself is not encrypted.
#ifndef KOLO_STORE_MESSAGE_AUTH_H_
#define KOLO_STORE_MESSAGE_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo {

inline constexpr size_t kStoreNonceBytes = 32;
inline constexpr size_t kStoreTagBytes = 32;  // one SHA-256

// `kStoreNonceBytes` bytes from OpenSSL's CSPRNG; kInternal if it has none.
StatusOr<std::string> RandomNonce();

// A new job secret: 128 random bits from OpenSSL's CSPRNG as 32 hex
// digits, printable so that it can travel in an environment variable or a
// file. kolorun draws one per job, and rank 0 one when it hands the store's
// address out over MPI.
StatusOr<std::string> NewJobSecret();

// HMAC-SHA256 of `data` under `key`; kStoreTagBytes bytes.
std::string HmacSha256(const std::string& key, const std::string& data);

// Compares in time that depends on the lengths only, so an attacker cannot
// learn a correct prefix from how long a refusal takes.
bool ConstantTimeEqual(const std::string& a, const std::string& b);

// What both ends of one connection agree on during the handshake.
struct HandshakeTranscript {
  std::string magic;
  std::string server_nonce;
  std::string client_nonce;
  int64_t rank = -1;
};

std::string ClientProof(const std::string& secret,
                        const HandshakeTranscript& transcript);
std::string ServerProof(const std::string& secret,
                        const HandshakeTranscript& transcript);
std::string SessionKey(const std::string& secret,
                       const HandshakeTranscript& transcript);

// Which way a message travels; part of its tag so that a message cannot be
// reflected back to the end that sent it.
enum class Direction : uint8_t { kClientToServer = 1, kServerToClient = 2 };

// Seals the messages one end sends and opens those it receives, counting
// both directions. Sticky: once a message fails, every later Open fails too,
// since the stream can no longer be trusted.
//
// Thread-safety: none; the owner serialises calls (one server thread per
// connection; the client's mutex).
class MessageAuthenticator {
 public:
  MessageAuthenticator(std::string session_key, Direction outgoing);

  // `body` followed by its tag; advances the sending sequence.
  std::string Seal(const std::string& body);
  // The body of `message` if its tag is right for the next receiving
  // sequence number, else kUnauthenticated naming the message.
  StatusOr<std::string> Open(const std::string& message);

 private:
  std::string Tag(Direction direction, uint64_t sequence,
                  const std::string& body) const;

  std::string session_key_;
  Direction outgoing_;
  Direction incoming_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
  bool failed_ = false;
};

}  // namespace kolo

#endif  // KOLO_STORE_MESSAGE_AUTH_H_
