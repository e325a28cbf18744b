#include "store/message_auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "common/config.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

HandshakeTranscript Transcript() {
  HandshakeTranscript t;
  t.magic = "KOLO-STORE-2";
  t.server_nonce = std::string(kStoreNonceBytes, 's');
  t.client_nonce = std::string(kStoreNonceBytes, 'c');
  t.rank = 3;
  return t;
}

// RFC 4231, test cases 1 and 2: the HMAC is the standard one.
TEST(MessageAuthTest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // An empty secret is weak but must not crash.
  EXPECT_EQ(HmacSha256("", "x").size(), kStoreTagBytes);
}

TEST(MessageAuthTest, NoncesAreFreshAndFullLength) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    StatusOr<std::string> nonce = RandomNonce();
    ASSERT_TRUE(nonce.ok()) << nonce.status().ToString();
    EXPECT_EQ(nonce->size(), kStoreNonceBytes);
    seen.insert(*nonce);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(MessageAuthTest, JobSecretsAreFreshHexOf128Bits) {
  StatusOr<std::string> a = NewJobSecret();
  StatusOr<std::string> b = NewJobSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);
  // kolorun's jobs use these: they must pass the store's own check.
  EXPECT_TRUE(CheckJobSecret(*a, "NewJobSecret").ok());
}

TEST(MessageAuthTest, ConstantTimeEqualComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEqual("", ""));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEqual("", "a"));
}

// Each proof and the key are bound to every field of the transcript, and to
// their own label, so none can stand in for another.
TEST(MessageAuthTest, ProofsAndKeyDependOnEveryFieldAndTheirLabel) {
  const std::string secret = "the job secret of this test";
  const HandshakeTranscript t = Transcript();
  const std::string client = ClientProof(secret, t);
  const std::string server = ServerProof(secret, t);
  const std::string key = SessionKey(secret, t);
  EXPECT_EQ(client, ClientProof(secret, t));
  EXPECT_EQ(std::set<std::string>({client, server, key}).size(), 3u);

  std::vector<HandshakeTranscript> variants(5, t);
  variants[0].magic = "KOLO-STORE-1";
  variants[1].server_nonce[0] = 'S';
  variants[2].client_nonce[kStoreNonceBytes - 1] = 'C';
  variants[3].rank = 4;
  variants[4].rank = -1;
  for (const HandshakeTranscript& v : variants) {
    EXPECT_NE(ClientProof(secret, v), client) << v.magic << " " << v.rank;
    EXPECT_NE(ServerProof(secret, v), server) << v.magic << " " << v.rank;
    EXPECT_NE(SessionKey(secret, v), key) << v.magic << " " << v.rank;
  }
  EXPECT_NE(ClientProof("another secret", t), client);

  // Fields are length-prefixed: moving bytes from one nonce to the other
  // changes the proof.
  HandshakeTranscript shifted = t;
  shifted.server_nonce += "c";
  shifted.client_nonce.pop_back();
  EXPECT_NE(ClientProof(secret, shifted), client);
}

TEST(MessageAuthTest, SealedMessagesOpenInOrderOnTheOtherEnd) {
  MessageAuthenticator client("key", Direction::kClientToServer);
  MessageAuthenticator server("key", Direction::kServerToClient);
  for (int i = 0; i < 5; ++i) {
    const std::string request = "request " + std::to_string(i);
    const std::string sealed = client.Seal(request);
    EXPECT_EQ(sealed.size(), request.size() + kStoreTagBytes);
    EXPECT_EQ(sealed.substr(0, request.size()), request);  // not encrypted
    StatusOr<std::string> opened = server.Open(sealed);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(*opened, request);
    StatusOr<std::string> answer = client.Open(server.Seal(""));
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(*answer, "");
  }
}

TEST(MessageAuthTest, AReplayedMessageFails) {
  MessageAuthenticator client("key", Direction::kClientToServer);
  MessageAuthenticator server("key", Direction::kServerToClient);
  const std::string first = client.Seal("add counter 1");
  ASSERT_TRUE(server.Open(first).ok());
  StatusOr<std::string> replay = server.Open(first);
  EXPECT_EQ(replay.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(replay.status().message(),
              HasSubstr("message 1 from the client failed authentication"));
}

TEST(MessageAuthTest, ReorderedMessagesFailAndTheFailureSticks) {
  MessageAuthenticator client("key", Direction::kClientToServer);
  MessageAuthenticator server("key", Direction::kServerToClient);
  const std::string first = client.Seal("first");
  const std::string second = client.Seal("second");
  EXPECT_FALSE(server.Open(second).ok());
  // The right message now fails too: the stream is no longer trusted.
  StatusOr<std::string> after = server.Open(first);
  EXPECT_EQ(after.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(after.status().message(),
              HasSubstr("follows one that failed authentication"));
}

TEST(MessageAuthTest, AFlippedBitAnywhereFails) {
  MessageAuthenticator client("key", Direction::kClientToServer);
  const std::string sealed = client.Seal("set key value");
  for (size_t i = 0; i < sealed.size(); ++i) {
    MessageAuthenticator server("key", Direction::kServerToClient);
    std::string tampered = sealed;
    tampered[i] ^= 0x01;
    EXPECT_FALSE(server.Open(tampered).ok()) << "byte " << i;
  }
}

TEST(MessageAuthTest, AMessageCannotBeReflectedOrMovedToAnotherSession) {
  MessageAuthenticator client("key", Direction::kClientToServer);
  const std::string sealed = client.Seal("get key");
  // Reflected: the client's own message sent back to it as an answer.
  MessageAuthenticator client_again("key", Direction::kClientToServer);
  EXPECT_FALSE(client_again.Open(sealed).ok());
  // Another connection has another session key.
  MessageAuthenticator other("other key", Direction::kServerToClient);
  EXPECT_FALSE(other.Open(sealed).ok());
}

TEST(MessageAuthTest, AMessageShorterThanATagFails) {
  MessageAuthenticator server("key", Direction::kServerToClient);
  StatusOr<std::string> opened = server.Open("short");
  EXPECT_EQ(opened.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(opened.status().message(),
              HasSubstr("shorter than its authentication tag"));
}

}  // namespace
}  // namespace kolo
