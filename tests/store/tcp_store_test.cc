#include "store/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "common/logging.h"
#include "store/message_auth.h"
#include "testing/process_resources.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

std::unique_ptr<TcpStoreServer> StartServer() {
  StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start("127.0.0.1", 0, kSecret);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

std::unique_ptr<TcpStoreClient> Connect(const TcpStoreServer& server,
                                        int32_t rank,
                                        const std::string& secret = kSecret) {
  StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      "127.0.0.1", server.port(), secret, rank, milliseconds(5000));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

TEST(TcpStoreTest, SetGetAddWaitAcrossClients) {
  auto server = StartServer();
  EXPECT_GT(server->port(), 0);
  auto a = Connect(*server, 0);
  auto b = Connect(*server, 1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Set("key", std::string("bin\0ary", 7)).ok());
  EXPECT_EQ(*b->Get("key", milliseconds(100)), std::string("bin\0ary", 7));
  EXPECT_EQ(*a->Add("counter", 2), 2);
  EXPECT_EQ(*b->Add("counter", 3), 5);
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    (void)a->Set("later", "x");
  });
  EXPECT_TRUE(b->Wait({"key", "later"}, milliseconds(5000)).ok());
  later.join();
  Status timeout = b->Wait({"missing"}, milliseconds(50));
  EXPECT_EQ(timeout.code(), StatusCode::kTimeout);
  EXPECT_THAT(timeout.message(), HasSubstr("'missing'"));
  EXPECT_TRUE(a->Close().ok());
  EXPECT_TRUE(b->Close().ok());
  EXPECT_TRUE(server->FailedRanks().empty());
}

TEST(TcpStoreTest, WrongSecretIsRejected) {
  auto server = StartServer();
  StatusOr<std::unique_ptr<TcpStoreClient>> intruder = TcpStoreClient::Connect(
      "127.0.0.1", server->port(), "not-the-secret-of-this-job", 0,
      milliseconds(5000));
  ASSERT_FALSE(intruder.ok());
  EXPECT_EQ(intruder.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(
      intruder.status().message(),
      HasSubstr("the store at 127.0.0.1:" + std::to_string(server->port()) +
                " refused rank 0: wrong job secret"));
  EXPECT_EQ(server->rejected_connections(), 1);
  // The server keeps serving honest clients.
  auto honest = Connect(*server, 0);
  ASSERT_TRUE(honest);
  EXPECT_TRUE(honest->Set("k", "v").ok());
}

TEST(TcpStoreTest, GarbageConnectionIsRejected) {
  auto server = StartServer();
  StatusOr<Socket> raw = Socket::Connect("127.0.0.1", server->port(),
                                         DeadlineAfter(milliseconds(2000)));
  ASSERT_TRUE(raw.ok());
  const char junk[] = "\x05\x00\x00\x00GET /";
  ASSERT_TRUE(
      raw->SendAll(junk, sizeof(junk) - 1, DeadlineAfter(milliseconds(1000)))
          .ok());
  char buffer[256];
  // The server answers with a refusal and closes; reading eventually ends.
  Status read =
      raw->RecvAll(buffer, sizeof(buffer), DeadlineAfter(milliseconds(5000)));
  EXPECT_EQ(read.code(), StatusCode::kPeerFailure);
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreTest, ClientThatVanishesIsRecordedAsFailed) {
  auto server = StartServer();
  auto survivor = Connect(*server, 0);
  auto doomed = Connect(*server, 3);
  ASSERT_TRUE(survivor && doomed);
  doomed.reset();  // closes the socket without a goodbye, like a killed process
  StatusOr<std::string> failed =
      survivor->Get(kFailedRanksKey, milliseconds(5000));
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(*failed, "3");
  EXPECT_EQ(server->FailedRanks(), std::vector<int32_t>{3});
}

// Per-node mode's node 0 keeps its store until every rank has left.
TEST(TcpStoreTest, CountsTheRanksStillConnected) {
  auto server = StartServer();
  auto wait_for = [&](int32_t expected) {
    for (int i = 0; i < 500 && server->connected_ranks() != expected; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    return server->connected_ranks();
  };
  auto a = Connect(*server, 0);
  auto b = Connect(*server, 1);
  auto observer = Connect(*server, -1);  // not a rank: not counted
  ASSERT_TRUE(a && b && observer);
  EXPECT_EQ(wait_for(2), 2);
  EXPECT_TRUE(a->Close().ok());
  EXPECT_EQ(wait_for(1), 1);
  b.reset();  // a drop counts as leaving too
  EXPECT_EQ(wait_for(0), 0);
}

TEST(TcpStoreTest, ConnectWaitsForALateServerThenTimesOut) {
  // Reserve a port, free it, and connect to it with nobody listening.
  int port = 0;
  {
    StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok());
    port = probe->LocalPort();
  }
  const auto start = Clock::now();
  StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect("127.0.0.1", port, kSecret, 0, milliseconds(300));
  EXPECT_EQ(client.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(client.status().message(),
              HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(TcpStoreTest, ServerStopWakesBlockedClients) {
  auto server = StartServer();
  auto client = Connect(*server, 0);
  ASSERT_TRUE(client);
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    server->Stop();
  });
  StatusOr<std::string> value = client->Get("never", milliseconds(20000));
  stopper.join();
  EXPECT_FALSE(value.ok());
}

// A client speaking the wire format by hand (tcp_store.h): a 4-byte
// length and a body of fields, a string being a 4-byte length and bytes.
// Hello runs the handshake with message_auth.h's proofs; from then on Ask
// seals each request and opens each answer, as TcpStoreClient does.
class RawClient {
 public:
  explicit RawClient(Socket socket) : socket_(std::move(socket)) {}

  static std::string U8(uint8_t v) {
    return std::string(1, static_cast<char>(v));
  }
  static std::string I64(int64_t v) {
    return std::string(reinterpret_cast<char*>(&v), 8);
  }
  static std::string Str(const std::string& text) {
    uint32_t n = static_cast<uint32_t>(text.size());
    return std::string(reinterpret_cast<char*>(&n), 4) + text;
  }

  Status Send(const std::string& body) {
    uint32_t length = static_cast<uint32_t>(body.size());
    const Deadline deadline = DeadlineAfter(milliseconds(5000));
    KOLO_RETURN_IF_ERROR(socket_.SendAll(&length, 4, deadline));
    return socket_.SendAll(body.data(), body.size(), deadline);
  }

  StatusOr<std::string> Receive() {
    uint32_t length = 0;
    const Deadline deadline = DeadlineAfter(milliseconds(5000));
    KOLO_RETURN_IF_ERROR(socket_.RecvAll(&length, 4, deadline));
    std::string body(length, '\0');
    KOLO_RETURN_IF_ERROR(socket_.RecvAll(body.data(), length, deadline));
    return body;
  }

  // The status an answer carries (a code, then the message as a string).
  static Status AnswerStatus(const std::string& answer) {
    uint32_t message_length = 0;
    std::memcpy(&message_length, answer.data() + 1, 4);
    return Status(static_cast<StatusCode>(answer[0]),
                  answer.substr(5, message_length));
  }

  // Reads the server's challenge (command 7, the magic, a nonce) and
  // returns its nonce.
  StatusOr<std::string> Challenge() {
    KOLO_ASSIGN_OR_RETURN(std::string challenge, Receive());
    if (challenge.size() != 1 + 4 + 12 + 4 + kStoreNonceBytes ||
        challenge[0] != 7 || challenge.substr(5, 12) != "KOLO-STORE-2") {
      return Internal("unexpected challenge");
    }
    return challenge.substr(challenge.size() - kStoreNonceBytes);
  }

  // The hello a client holding `secret` sends for this challenge, and the
  // transcript both ends then share.
  static std::string HelloFor(const std::string& secret,
                              const std::string& server_nonce, int64_t rank,
                              HandshakeTranscript* transcript) {
    transcript->magic = "KOLO-STORE-2";
    transcript->server_nonce = server_nonce;
    transcript->client_nonce = std::string(kStoreNonceBytes, 'n');
    transcript->rank = rank;
    return U8(1) + Str(transcript->magic) + Str(transcript->client_nonce) +
           I64(rank) + Str(ClientProof(secret, *transcript));
  }

  // The whole handshake; afterwards Ask seals and opens.
  Status Hello(const std::string& secret, int64_t rank) {
    KOLO_ASSIGN_OR_RETURN(std::string server_nonce, Challenge());
    HandshakeTranscript transcript;
    KOLO_RETURN_IF_ERROR(
        Send(HelloFor(secret, server_nonce, rank, &transcript)));
    KOLO_ASSIGN_OR_RETURN(std::string answer, Receive());
    KOLO_RETURN_IF_ERROR(AnswerStatus(answer));
    if (answer.size() < kStoreTagBytes ||
        answer.substr(answer.size() - kStoreTagBytes) !=
            ServerProof(secret, transcript)) {
      return Unauthenticated("the server's proof is wrong");
    }
    auth_.emplace(SessionKey(secret, transcript), Direction::kClientToServer);
    return Status::Ok();
  }

  // Sends one request (sealed once Hello succeeded) and returns the
  // answer's status.
  Status Ask(const std::string& body) {
    KOLO_RETURN_IF_ERROR(Send(auth_ ? auth_->Seal(body) : body));
    KOLO_ASSIGN_OR_RETURN(std::string answer, Receive());
    if (auth_) {
      KOLO_ASSIGN_OR_RETURN(answer, auth_->Open(answer));
    }
    return AnswerStatus(answer);
  }

  // Reads until the server closes the connection: kPeerFailure then, or
  // kTimeout if it is still open after 5 s.
  Status ReadUntilClosed() {
    const Deadline deadline = DeadlineAfter(milliseconds(5000));
    while (true) {
      char c = 0;
      KOLO_RETURN_IF_ERROR(socket_.RecvAll(&c, 1, deadline));
    }
  }

  Socket& socket() { return socket_; }

 private:
  Socket socket_;
  std::optional<MessageAuthenticator> auth_;
};

RawClient ConnectRaw(const TcpStoreServer& server) {
  StatusOr<Socket> socket = Socket::Connect("127.0.0.1", server.port(),
                                            DeadlineAfter(milliseconds(2000)));
  EXPECT_TRUE(socket.ok()) << socket.status().ToString();
  return RawClient(socket.ok() ? std::move(socket).value() : Socket());
}

// Each bad request gets its own answer, and the connection carries on.
TEST(TcpStoreTest,
     MalformedAndUnknownRequestsAreAnsweredAndTheConnectionStays) {
  auto server = StartServer();
  RawClient raw = ConnectRaw(*server);
  ASSERT_TRUE(raw.Hello(kSecret, 0).ok());

  Status unknown = raw.Ask(RawClient::U8(99));
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "unknown store command");

  Status empty = raw.Ask("");
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(), "unknown store command");

  // A set whose value is cut short, a get without its timeout, an add
  // without its delta, a wait that announces more keys than it carries.
  const struct {
    std::string body;
    const char* message;
  } malformed[] = {
      {RawClient::U8(2) + RawClient::Str("k") + std::string("\x09\0\0\0ab", 6),
       "malformed set"},
      {RawClient::U8(3) + RawClient::Str("k"), "malformed get"},
      {RawClient::U8(4) + RawClient::Str("k"), "malformed add"},
      {RawClient::U8(5) + RawClient::I64(3) + RawClient::Str("k"),
       "malformed wait"},
  };
  for (const auto& m : malformed) {
    Status s = raw.Ask(m.body);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << m.message;
    EXPECT_EQ(s.message(), m.message);
  }

  // Still served: a well-formed set and a goodbye.
  EXPECT_TRUE(
      raw.Ask(RawClient::U8(2) + RawClient::Str("k") + RawClient::Str("v"))
          .ok());
  auto reader = Connect(*server, 1);
  ASSERT_TRUE(reader);
  EXPECT_EQ(*reader->Get("k", milliseconds(1000)), "v");
  EXPECT_TRUE(raw.Ask(RawClient::U8(6)).ok());
  EXPECT_EQ(server->rejected_connections(), 0);
}

// Only ranks are reported when they vanish: a client that said -1 (a tool,
// not a rank) and a rank that said goodbye are not failures.
TEST(TcpStoreTest, OnlyARankThatVanishesWithoutAGoodbyeIsAFailure) {
  auto server = StartServer();
  auto observer = Connect(*server, -1);
  auto polite = Connect(*server, 2);
  ASSERT_TRUE(observer && polite);
  EXPECT_TRUE(polite->Close().ok());
  observer.reset();
  auto doomed = Connect(*server, 5);
  ASSERT_TRUE(doomed);
  doomed.reset();
  auto survivor = Connect(*server, 0);
  ASSERT_TRUE(survivor);
  StatusOr<std::string> failed =
      survivor->Get(kFailedRanksKey, milliseconds(5000));
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(*failed, "5");
  EXPECT_EQ(server->FailedRanks(), std::vector<int32_t>{5});
}

// A hello with the right proof but the wrong magic is refused like a
// wrong secret: counted, answered kUnauthenticated, closed.
TEST(TcpStoreTest, AHelloWithTheWrongMagicIsRefused) {
  auto server = StartServer();
  RawClient raw = ConnectRaw(*server);
  StatusOr<std::string> nonce = raw.Challenge();
  ASSERT_TRUE(nonce.ok()) << nonce.status().ToString();
  HandshakeTranscript transcript;
  transcript.magic = "OTHER-STORE-9";
  transcript.server_nonce = *nonce;
  transcript.client_nonce = std::string(kStoreNonceBytes, 'n');
  transcript.rank = 0;
  Status s =
      raw.Ask(RawClient::U8(1) + RawClient::Str(transcript.magic) +
              RawClient::Str(transcript.client_nonce) + RawClient::I64(0) +
              RawClient::Str(ClientProof(kSecret, transcript)));
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "malformed hello");
  EXPECT_EQ(server->rejected_connections(), 1);
}

// The secret never travels: the hello carries a proof, and nothing in the
// handshake contains the secret's bytes.
TEST(TcpStoreTest, TheSecretIsNotSentInTheHello) {
  auto server = StartServer();
  RawClient raw = ConnectRaw(*server);
  StatusOr<std::string> nonce = raw.Challenge();
  ASSERT_TRUE(nonce.ok()) << nonce.status().ToString();
  HandshakeTranscript transcript;
  const std::string hello =
      RawClient::HelloFor(kSecret, *nonce, 0, &transcript);
  EXPECT_EQ(hello.find(kSecret), std::string::npos);
  ASSERT_TRUE(raw.Send(hello).ok());
  StatusOr<std::string> answer = raw.Receive();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(RawClient::AnswerStatus(*answer).ok());
  EXPECT_EQ(answer->find(kSecret), std::string::npos);
}

// A client without the secret cannot read or write a key, even when it
// sends its requests right behind its hello without waiting for the
// verdict, sealed with the key its wrong secret gives.
TEST(TcpStoreTest, AWrongSecretNeverReachesTheData) {
  auto server = StartServer();
  auto honest = Connect(*server, 0);
  ASSERT_TRUE(honest);
  ASSERT_TRUE(honest->Set("kept", "honest").ok());

  RawClient intruder = ConnectRaw(*server);
  StatusOr<std::string> nonce = intruder.Challenge();
  ASSERT_TRUE(nonce.ok()) << nonce.status().ToString();
  HandshakeTranscript transcript;
  const std::string hello =
      RawClient::HelloFor("not-the-secret-of-this-job", *nonce, 0, &transcript);
  MessageAuthenticator wrong(
      SessionKey("not-the-secret-of-this-job", transcript),
      Direction::kClientToServer);
  // One write, so that all of it is on its way before the server answers.
  std::string frames;
  for (const std::string& body :
       {hello,
        wrong.Seal(RawClient::U8(2) + RawClient::Str("planted") +
                   RawClient::Str("by the intruder")),
        wrong.Seal(RawClient::U8(2) + RawClient::Str("kept") +
                   RawClient::Str("overwritten"))}) {
    const uint32_t length = static_cast<uint32_t>(body.size());
    frames.append(reinterpret_cast<const char*>(&length), 4);
    frames += body;
  }
  ASSERT_TRUE(intruder.socket()
                  .SendAll(frames.data(), frames.size(),
                           DeadlineAfter(milliseconds(5000)))
                  .ok());
  StatusOr<std::string> verdict = intruder.Receive();
  ASSERT_TRUE(verdict.ok()) << verdict.status().ToString();
  Status refusal = RawClient::AnswerStatus(*verdict);
  EXPECT_EQ(refusal.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(refusal.message(), "wrong job secret");
  EXPECT_EQ(intruder.ReadUntilClosed().code(),
            StatusCode::kPeerFailure);  // closed, nothing else
  EXPECT_EQ(server->rejected_connections(), 1);

  EXPECT_EQ(honest->Get("planted", milliseconds(100)).status().code(),
            StatusCode::kTimeout);
  EXPECT_EQ(*honest->Get("kept", milliseconds(100)), "honest");
}

// The lines of `log` that contain `text`.
std::vector<std::string> LinesWith(const std::string& log,
                                   const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(log);
  for (std::string line; std::getline(stream, line);) {
    if (line.find(text) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// Each refusal is counted, but only the first from an address is logged:
// a job's worker retrying with a stale secret must not flood the log.
TEST(TcpStoreTest, RefusalsAreLoggedOncePerAddress) {
  SetMinLogLevel(LogLevel::kInfo);
  auto server = StartServer();
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    StatusOr<std::unique_ptr<TcpStoreClient>> intruder =
        TcpStoreClient::Connect("127.0.0.1", server->port(),
                                "a-stale-secret-from-last-week", 0,
                                milliseconds(5000));
    EXPECT_EQ(intruder.status().code(), StatusCode::kUnauthenticated);
  }
  RawClient garbage = ConnectRaw(*server);  // another reason, same address
  EXPECT_TRUE(garbage.Send("junk").ok());
  EXPECT_EQ(garbage.ReadUntilClosed().code(), StatusCode::kPeerFailure);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(server->rejected_connections(), 4);
  const std::vector<std::string> lines =
      LinesWith(log, "store: refused a client from 127.0.0.1:");
  ASSERT_EQ(lines.size(), 1u) << log;
  EXPECT_THAT(lines[0], HasSubstr(": wrong job secret"));
}

// A hello that claims to be 64 MiB long is refused on its length prefix:
// the server answers at once, and four such connections held open do not
// make it allocate (the old server zero-filled a buffer of the claimed
// size for each, then waited up to 10 s for the bytes).
TEST(TcpStoreTest, AHelloClaimingAHugeLengthIsRefusedWithoutAllocatingIt) {
  auto server = StartServer();
  const int64_t resident_before = testing::ResidentBytes();
  ASSERT_GT(resident_before, 0);
  constexpr uint32_t kClaimed = 64u << 20;
  std::vector<RawClient> liars;
  for (int i = 0; i < 4; ++i) {
    liars.push_back(ConnectRaw(*server));
    ASSERT_TRUE(liars.back().Challenge().ok());
    ASSERT_TRUE(liars.back()
                    .socket()
                    .SendAll(&kClaimed, 4, DeadlineAfter(milliseconds(1000)))
                    .ok());
  }
  for (RawClient& liar : liars) {
    StatusOr<std::string> verdict = liar.Receive();
    ASSERT_TRUE(verdict.ok()) << verdict.status().ToString();
    Status refusal = RawClient::AnswerStatus(*verdict);
    EXPECT_EQ(refusal.code(), StatusCode::kUnauthenticated);
    EXPECT_THAT(refusal.message(),
                HasSubstr("a message of 67108864 bytes is larger than the "
                          "limit of " +
                          std::to_string(kStoreMaxHandshakeBytes) + " bytes"));
  }
  // Measured while the connections are still open; 16 MiB is far below
  // one claimed buffer and far above what the server's threads touch.
  EXPECT_LT(testing::ResidentBytes() - resident_before, int64_t{16} << 20);
  EXPECT_EQ(server->rejected_connections(), 4);
}

// A connection's descriptor stays the server's until its thread is joined:
// Stop() must not shut down a number the kernel has since given to another
// socket of the process (here: socket pairs made after a refused
// connection ended).
TEST(TcpStoreTest, StopLeavesDescriptorsItNoLongerOwnsAlone) {
  auto server = StartServer();
  {
    RawClient garbage = ConnectRaw(*server);
    ASSERT_TRUE(garbage.Send("junk").ok());
    EXPECT_EQ(garbage.ReadUntilClosed().code(), StatusCode::kPeerFailure);
  }
  // The server's thread has ended and freed its number by now (the old
  // server closed it at once; this one when it reaps the thread).
  std::this_thread::sleep_for(milliseconds(300));
  std::vector<std::array<int, 2>> pairs(4);
  for (auto& pair : pairs) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair.data()), 0);
  }
  server->Stop();
  for (auto& pair : pairs) {
    const char sent = 'x';
    char received = 0;
    EXPECT_EQ(::send(pair[0], &sent, 1, MSG_NOSIGNAL), 1) << pair[0];
    EXPECT_EQ(::recv(pair[1], &received, 1, MSG_DONTWAIT), 1) << pair[1];
    ::close(pair[0]);
    ::close(pair[1]);
  }
}

// A TCP connection to the server from `source` (any 127.0.0.0/8 address
// is this host's loopback), the way a client on another host would come.
Socket ConnectFrom(const std::string& source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0)
      << source;
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0)
      << source;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return Socket(fd);
}

// Whether the server closed `socket` without sending a byte.
bool ClosedUnread(Socket& socket) {
  char c = 0;
  return socket.RecvAll(&c, 1, DeadlineAfter(milliseconds(5000))).code() ==
         StatusCode::kPeerFailure;
}

// Silent connections hold handshake slots; one address holds at most
// kStoreMaxHandshakesPerHost, and the next from it is closed unread. An
// honest client from that address retries until a slot frees.
TEST(TcpStoreTest, TurnsAwayHandshakesOverThePerAddressCap) {
  auto server = StartServer();
  std::vector<RawClient> silent;
  for (int i = 0; i < kStoreMaxHandshakesPerHost; ++i) {
    silent.emplace_back(ConnectFrom("127.0.0.1", server->port()));
    ASSERT_TRUE(silent.back().Challenge().ok()) << i;
  }
  Socket over = ConnectFrom("127.0.0.1", server->port());
  EXPECT_TRUE(ClosedUnread(over));
  EXPECT_EQ(server->turned_away_connections(), 1);
  // Another address still gets in.
  RawClient elsewhere(ConnectFrom("127.0.0.3", server->port()));
  EXPECT_TRUE(elsewhere.Hello(kSecret, -1).ok());

  std::thread patience([&] {
    std::this_thread::sleep_for(milliseconds(300));
    silent.clear();  // each closed hello is refused, and its slot freed
  });
  StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      "127.0.0.1", server->port(), kSecret, 0, milliseconds(10000));
  patience.join();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->Set("k", "v").ok());
}

// kStoreMaxHandshakes in all, from many addresses: the next connection is
// closed unread, and a burst of them is logged as one line with a count.
TEST(TcpStoreTest, TurnsAwayHandshakesOverTheTotalCapAndLogsACount) {
  SetMinLogLevel(LogLevel::kInfo);
  auto server = StartServer();
  std::vector<RawClient> silent;
  for (int i = 0; i < kStoreMaxHandshakes; ++i) {
    const std::string source =
        "127.0.1." + std::to_string(1 + i / kStoreMaxHandshakesPerHost);
    silent.emplace_back(ConnectFrom(source, server->port()));
    ASSERT_TRUE(silent.back().Challenge().ok()) << i;
  }
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    Socket over = ConnectFrom("127.0.2.1", server->port());
    EXPECT_TRUE(ClosedUnread(over)) << i;
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(server->turned_away_connections(), 3);
  const std::vector<std::string> lines = LinesWith(log, "store: turned away");
  ASSERT_EQ(lines.size(), 1u) << log;
  EXPECT_THAT(lines[0], HasSubstr("turned away 1 connection(s) unread"));
  EXPECT_THAT(lines[0], HasSubstr("the latest from 127.0.2.1:"));
  EXPECT_THAT(lines[0],
              HasSubstr(std::to_string(kStoreMaxHandshakes) +
                        " handshakes in progress (kStoreMaxHandshakes)"));
  EXPECT_EQ(server->rejected_connections(), 0);
}

// A connection that takes the challenge and says nothing holds its slot
// for kStoreHandshakeTimeout at most, then is refused and its slot freed.
TEST(TcpStoreTest, ASilentHandshakeEndsAtItsDeadline) {
  auto server = StartServer();
  // Before connecting: the server's deadline runs from its accept, which
  // on a loaded machine comes well before the challenge reaches us.
  const auto start = Clock::now();
  RawClient silent = ConnectRaw(*server);
  ASSERT_TRUE(silent.Challenge().ok());
  uint32_t length = 0;
  ASSERT_TRUE(silent.socket()
                  .RecvAll(&length, 4, DeadlineAfter(std::chrono::seconds(30)))
                  .ok());
  // Only a lower bound: on a loaded machine the verdict may come late.
  EXPECT_GE(Clock::now() - start, kStoreHandshakeTimeout - milliseconds(100));
  std::string verdict(length, '\0');
  ASSERT_TRUE(
      silent.socket()
          .RecvAll(verdict.data(), length, DeadlineAfter(milliseconds(5000)))
          .ok());
  Status refusal = RawClient::AnswerStatus(verdict);
  EXPECT_EQ(refusal.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(refusal.message(),
              HasSubstr("no valid hello: timed out waiting to receive"));
  EXPECT_EQ(server->rejected_connections(), 1);
}

// A job secret shorter than kMinJobSecretBytes is refused on both ends,
// before any socket, with the way to make a good one.
TEST(TcpStoreTest, ShortOrEmptySecretsAreRefused) {
  for (const std::string secret : {"", "s3cret", "0123456789abcde"}) {
    StatusOr<std::unique_ptr<TcpStoreServer>> server =
        TcpStoreServer::Start("127.0.0.1", 0, secret);
    ASSERT_FALSE(server.ok()) << "'" << secret << "'";
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(server.status().message(),
                HasSubstr("the job secret of a store to serve on 127.0.0.1"));
    EXPECT_THAT(server.status().message(),
                HasSubstr("head -c 32 /dev/urandom | base64 > secret"));

    StatusOr<std::unique_ptr<TcpStoreClient>> client =
        TcpStoreClient::Connect("127.0.0.1", 1, secret, 0, milliseconds(5000));
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(client.status().message(),
                HasSubstr("the job secret for the store at 127.0.0.1:1 " +
                          std::string(secret.empty() ? "is empty"
                                                     : "holds a job secret")));
  }
  auto server = StartServer();
  EXPECT_TRUE(server != nullptr);  // 32 bytes: accepted
}

// A store that cannot prove it holds the secret gets no requests: here a
// fake one that challenges properly but answers with a made-up proof.
TEST(TcpStoreTest, AClientRefusesAStoreWithoutTheSecret) {
  StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const int port = listener->LocalPort();
  Status after_answer = Status::Ok();
  std::thread impostor([&] {
    StatusOr<Socket> accepted =
        listener->Accept(DeadlineAfter(milliseconds(5000)));
    if (!accepted.ok()) return;
    RawClient peer(std::move(accepted).value());
    Status sent = peer.Send(RawClient::U8(7) + RawClient::Str("KOLO-STORE-2") +
                            RawClient::Str(std::string(kStoreNonceBytes, 'x')));
    StatusOr<std::string> hello = sent.ok() ? peer.Receive() : sent;
    if (!hello.ok()) return;
    (void)peer.Send(RawClient::U8(0) + RawClient::Str("") +
                    RawClient::Str(std::string(kStoreTagBytes, '\0')));
    // The client must hang up rather than send a request.
    after_answer = peer.Receive().status();
  });
  StatusOr<std::unique_ptr<TcpStoreClient>> client = TcpStoreClient::Connect(
      "127.0.0.1", port, kSecret, 0, milliseconds(5000));
  impostor.join();
  EXPECT_EQ(client.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(client.status().message(),
              HasSubstr("could not prove it holds the job secret"));
  EXPECT_EQ(after_answer.code(), StatusCode::kPeerFailure);
}

// A man in the middle for the tests: accepts one client, connects it to the
// server and relays whole messages (a 4-byte length and a body) both ways.
// It records what the client sent, and lets a test alter or repeat any
// message on its way: the meddler sees each message (upstream: from the
// client; index counts from 0 per direction) and returns how many copies to
// forward.
class Proxy {
 public:
  using Meddler =
      std::function<int(bool upstream, int index, std::string& body)>;

  Proxy(int server_port, Meddler meddler)
      : server_port_(server_port), meddler_(std::move(meddler)) {
    StatusOr<Socket> listener = Socket::Listen("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    listener_ = std::move(listener).value();
    port_ = listener_.LocalPort();
    thread_ = std::thread([this] { Run(); });
  }
  ~Proxy() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      client_.Shutdown();
      server_.Shutdown();
    }
    thread_.join();
  }

  int port() const { return port_; }
  // Every byte the client sent, as it was on the wire.
  std::string upstream_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return upstream_bytes_;
  }

 private:
  void Run() {
    StatusOr<Socket> client = Timeout("no client yet");
    const Deadline deadline = DeadlineAfter(milliseconds(10000));
    do {
      client = listener_.Accept(DeadlineAfter(milliseconds(50)));
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    } while (!client.ok() && Clock::now() < deadline);
    if (!client.ok()) return;
    StatusOr<Socket> server =
        Socket::Connect("127.0.0.1", server_port_, deadline);
    if (!server.ok()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      client_ = std::move(client).value();
      server_ = std::move(server).value();
    }
    // SendAll and RecvAll keep no state in the Socket, so one thread reading
    // and another writing the same socket is safe.
    std::thread downstream([this] { Relay(server_, client_, false); });
    Relay(client_, server_, true);
    downstream.join();
  }

  void Relay(Socket& from, Socket& to, bool upstream) {
    for (int index = 0;; ++index) {
      const Deadline deadline = DeadlineAfter(milliseconds(20000));
      uint32_t length = 0;
      if (!from.RecvAll(&length, 4, deadline).ok()) break;
      std::string body(length, '\0');
      if (!from.RecvAll(body.data(), length, deadline).ok()) break;
      if (upstream) {
        std::lock_guard<std::mutex> lock(mutex_);
        upstream_bytes_.append(reinterpret_cast<char*>(&length), 4);
        upstream_bytes_ += body;
      }
      const int copies = meddler_ ? meddler_(upstream, index, body) : 1;
      bool sent = true;
      for (int i = 0; sent && i < copies; ++i) {
        sent = to.SendAll(&length, 4, deadline).ok() &&
               to.SendAll(body.data(), body.size(), deadline).ok();
      }
      if (!sent) break;
    }
    // One side hung up: hang up the other, which ends the other relay too.
    from.Shutdown();
    to.Shutdown();
  }

  const int server_port_;
  const Meddler meddler_;
  Socket listener_;
  int port_ = 0;
  std::mutex mutex_;
  bool stopping_ = false;  // guarded by mutex_
  Socket client_;          // set under mutex_ before the relays start
  Socket server_;
  std::string upstream_bytes_;  // guarded by mutex_
  std::thread thread_;
};

// Flips the last byte of a sealed message's body (the byte before its tag).
void FlipLastBodyByte(std::string& body) {
  ASSERT_GT(body.size(), kStoreTagBytes);
  body[body.size() - kStoreTagBytes - 1] ^= 0x01;
}

StatusOr<std::unique_ptr<TcpStoreClient>> ConnectThrough(const Proxy& proxy,
                                                         int32_t rank) {
  return TcpStoreClient::Connect("127.0.0.1", proxy.port(), kSecret, rank,
                                 milliseconds(5000));
}

// Everything an honest client sent on one connection, replayed byte for
// byte into a new one, is refused: the server's new nonce makes the
// recorded proof worthless, and the recorded requests never run.
TEST(TcpStoreTest, ARecordedConnectionReplayedIntoANewOneIsRefused) {
  auto server = StartServer();
  std::string recorded;
  {
    Proxy proxy(server->port(), nullptr);
    StatusOr<std::unique_ptr<TcpStoreClient>> client = ConnectThrough(proxy, 0);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ASSERT_TRUE((*client)->Set("replayed", "from the recording").ok());
    EXPECT_EQ(*(*client)->Add("replayed counter", 1), 1);
    ASSERT_TRUE((*client)->Close().ok());
    recorded = proxy.upstream_bytes();
  }
  auto honest = Connect(*server, 1);
  ASSERT_TRUE(honest);
  ASSERT_TRUE(honest->Set("replayed", "current").ok());

  RawClient replay = ConnectRaw(*server);
  ASSERT_TRUE(replay.socket()
                  .SendAll(recorded.data(), recorded.size(),
                           DeadlineAfter(milliseconds(5000)))
                  .ok());
  EXPECT_EQ(replay.ReadUntilClosed().code(), StatusCode::kPeerFailure);
  EXPECT_EQ(server->rejected_connections(), 1);
  EXPECT_EQ(*honest->Get("replayed", milliseconds(100)), "current");
  EXPECT_EQ(*honest->Add("replayed counter", 0), 1);
}

// A request repeated within its own connection fails its tag (its sequence
// number has passed), so the add runs once.
TEST(TcpStoreTest, ARequestReplayedWithinItsConnectionRunsOnce) {
  auto server = StartServer();
  Proxy proxy(server->port(), [](bool upstream, int index, std::string&) {
    return upstream && index == 1 ? 2 : 1;  // 0 is the hello
  });
  StatusOr<std::unique_ptr<TcpStoreClient>> client = ConnectThrough(proxy, 0);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(*(*client)->Add("counter", 1), 1);
  EXPECT_FALSE((*client)->Add("counter", 1).ok());  // the server hung up
  auto honest = Connect(*server, 1);
  ASSERT_TRUE(honest);
  EXPECT_EQ(*honest->Add("counter", 0), 1);
}

// One flipped byte in a request's body: the server refuses the request,
// says why, and closes the connection.
TEST(TcpStoreTest, ATamperedRequestClosesTheConnection) {
  auto server = StartServer();
  Proxy proxy(server->port(), [](bool upstream, int index, std::string& body) {
    if (upstream && index == 1) FlipLastBodyByte(body);
    return 1;
  });
  StatusOr<std::unique_ptr<TcpStoreClient>> client = ConnectThrough(proxy, 0);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Status set = (*client)->Set("tampered", "value");
  EXPECT_EQ(set.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(set.message(), HasSubstr("dropped this client: message 0 from "
                                       "the client failed authentication"));
  EXPECT_EQ((*client)->Set("after", "x").code(), StatusCode::kAborted);
  auto honest = Connect(*server, 1);
  ASSERT_TRUE(honest);
  EXPECT_EQ(honest->Get("tampered", milliseconds(100)).status().code(),
            StatusCode::kTimeout);
}

// One flipped byte in a response: the client does not believe it, and
// closes the connection.
TEST(TcpStoreTest, ATamperedResponseClosesTheConnection) {
  auto server = StartServer();
  auto writer = Connect(*server, 1);
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->Set("key", "true value").ok());
  // Downstream 0 is the challenge, 1 the verdict, 2 the first response.
  Proxy proxy(server->port(), [](bool upstream, int index, std::string& body) {
    if (!upstream && index == 2) FlipLastBodyByte(body);
    return 1;
  });
  StatusOr<std::unique_ptr<TcpStoreClient>> client = ConnectThrough(proxy, 0);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  StatusOr<std::string> value = (*client)->Get("key", milliseconds(1000));
  EXPECT_EQ(value.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(value.status().message(),
              HasSubstr("message 0 from the server failed authentication"));
  EXPECT_EQ((*client)->Get("key", milliseconds(100)).status().code(),
            StatusCode::kAborted);
}

}  // namespace
}  // namespace kolo
