#include "store/tcp_store.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <system_error>

#include "common/config.h"
#include "common/logging.h"

namespace kolo {
namespace {

// The protocol's name and version; part of every proof, so a client and a
// server of different versions refuse each other instead of misreading.
constexpr char kMagic[] = "KOLO-STORE-2";
// The largest message an authenticated peer may send (a value of the
// job's rendezvous data); the handshake's frames have kStoreMaxHandshakeBytes.
constexpr uint32_t kMaxMessageBytes = 64u << 20;
// How often the accept loop looks up from accept() to reap finished
// connections and notice Stop(), and how long it pauses when accept()
// fails (out of descriptors: the pending connection stays queued, so
// polling again at once would spin).
constexpr std::chrono::milliseconds kAcceptTick{100};
// Connections turned away are logged as a count at most this often: a flood
// must not flood the log too.
constexpr std::chrono::seconds kTurnAwayLogInterval{10};
// Slack on top of a server-side wait, for the request and response to travel.
constexpr std::chrono::seconds kIoSlack{10};
const Deadline kNoDeadline = Clock::time_point::max();

enum class Command : uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kAdd,
  kWait,
  kGoodbye,
  kChallenge,
};
// Addresses whose refusals are logged; beyond this many a scan of the
// cluster is under way and the counter tells the rest.
constexpr size_t kMaxRefusedHostsLogged = 1024;

// Builds a message body field by field.
class Writer {
 public:
  Writer& U8(uint8_t v) { return Bytes(&v, 1); }
  Writer& I64(int64_t v) { return Bytes(&v, sizeof(v)); }
  Writer& Str(const std::string& s) {
    uint32_t n = static_cast<uint32_t>(s.size());
    Bytes(&n, sizeof(n));
    return Bytes(s.data(), s.size());
  }
  const std::string& body() const { return body_; }

 private:
  Writer& Bytes(const void* p, size_t n) {
    body_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string body_;
};

// Reads fields back; any overrun makes ok() false instead of reading past
// the end, so a malformed message cannot crash the server.
class Reader {
 public:
  explicit Reader(const std::string& body) : body_(body) {}
  uint8_t U8() {
    uint8_t v = 0;
    Bytes(&v, 1);
    return v;
  }
  int64_t I64() {
    int64_t v = 0;
    Bytes(&v, sizeof(v));
    return v;
  }
  std::string Str() {
    uint32_t n = 0;
    Bytes(&n, sizeof(n));
    if (!ok_ || n > body_.size() - offset_) {
      ok_ = false;
      return {};
    }
    std::string s = body_.substr(offset_, n);
    offset_ += n;
    return s;
  }
  bool ok() const { return ok_; }

 private:
  void Bytes(void* p, size_t n) {
    if (!ok_ || n > body_.size() - offset_) {
      ok_ = false;
      return;
    }
    std::memcpy(p, body_.data() + offset_, n);
    offset_ += n;
  }
  const std::string& body_;
  size_t offset_ = 0;
  bool ok_ = true;
};

Status SendMessage(Socket& socket, const std::string& body, Deadline deadline) {
  uint32_t length = static_cast<uint32_t>(body.size());
  KOLO_RETURN_IF_ERROR(socket.SendAll(&length, sizeof(length), deadline));
  return socket.SendAll(body.data(), body.size(), deadline);
}

// A message of at most `max_bytes`, checked against its length prefix
// before its buffer is allocated.
StatusOr<std::string> ReceiveMessage(Socket& socket, Deadline deadline,
                                     uint32_t max_bytes = kMaxMessageBytes) {
  uint32_t length = 0;
  KOLO_RETURN_IF_ERROR(socket.RecvAll(&length, sizeof(length), deadline));
  if (length > max_bytes) {
    return InvalidArgument("a message of " + std::to_string(length) +
                           " bytes is larger than the limit of " +
                           std::to_string(max_bytes) + " bytes");
  }
  std::string body(length, '\0');
  KOLO_RETURN_IF_ERROR(socket.RecvAll(body.data(), length, deadline));
  return body;
}

std::string Response(const Status& status, const std::string& value = "") {
  return Writer()
      .U8(static_cast<uint8_t>(status.code()))
      .Str(status.message())
      .Str(value)
      .body();
}

// "10.1.0.3:51234" -> "10.1.0.3" (and "::1:51234" -> "::1").
std::string HostOf(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

std::chrono::milliseconds Millis(int64_t ms) {
  return std::chrono::milliseconds(std::max<int64_t>(ms, 0));
}

}  // namespace

// ---------------------------------------------------------------- server

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const std::string& host, int port, std::string secret) {
  KOLO_RETURN_IF_ERROR(
      CheckJobSecret(secret, "the job secret of a store to serve on " + host));
  KOLO_ASSIGN_OR_RETURN(Socket listener, Socket::Listen(host, port));
  std::unique_ptr<TcpStoreServer> server(
      new TcpStoreServer(std::move(listener), std::move(secret)));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpStoreServer::TcpStoreServer(Socket listener, std::string secret)
    : listener_(std::move(listener)),
      secret_(std::move(secret)),
      port_(listener_.LocalPort()) {}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::AcceptLoop() {
  pthread_setname_np(pthread_self(), "kolo-store");
  bool failing = false;  // logged once per run of failed accepts
  while (!stopping_.load()) {
    ReapFinished();
    StatusOr<Socket> client = listener_.Accept(DeadlineAfter(kAcceptTick));
    if (client.ok() || client.status().code() == StatusCode::kTimeout) {
      if (failing) {
        KOLO_LOG(WARNING) << "store: accepting again";
      }
      failing = false;
      if (client.ok()) Admit(std::move(client).value());
      continue;
    }
    if (!failing) {
      KOLO_LOG(WARNING) << "store: " << client.status().message()
                        << " (retrying every " << kAcceptTick.count()
                        << " ms; logged again when it recovers)";
    }
    failing = true;
    std::this_thread::sleep_for(kAcceptTick);
  }
}

void TcpStoreServer::Admit(Socket client) {
  const std::string peer = client.PeerAddress();
  const std::string host = HostOf(peer);
  MutexLock lock(&mutex_);
  if (stopping_.load()) return;
  const auto from_host = handshakes_by_host_.find(host);
  const int32_t host_handshakes =
      from_host == handshakes_by_host_.end() ? 0 : from_host->second;
  if (handshakes_ >= kStoreMaxHandshakes) {
    return TurnAway(peer, std::to_string(handshakes_) +
                              " handshakes in progress (kStoreMaxHandshakes)");
  }
  if (host_handshakes >= kStoreMaxHandshakesPerHost) {
    return TurnAway(peer, std::to_string(host_handshakes) +
                              " handshakes in progress from " + host +
                              " (kStoreMaxHandshakesPerHost)");
  }
  Connection& connection = connections_.emplace_back();
  connection.socket = std::move(client);
  connection.peer = peer;
  try {
    connection.thread =
        std::thread([this, c = &connection] { ServeClient(c); });
  } catch (const std::system_error& e) {
    // Out of threads (EAGAIN): the process hosting the store must not die
    // of it; the connection goes as one over the caps would.
    connections_.pop_back();
    return TurnAway(peer, std::string("no thread to serve it: ") + e.what());
  }
  ++handshakes_;
  ++handshakes_by_host_[host];
}

void TcpStoreServer::TurnAway(const std::string& peer, const std::string& why) {
  turned_away_.fetch_add(1);
  ++turned_away_unlogged_;
  const Clock::time_point now = Clock::now();
  if (now < next_turn_away_log_ || stopping_.load()) return;
  next_turn_away_log_ = now + kTurnAwayLogInterval;
  KOLO_LOG(WARNING) << "store: turned away " << turned_away_unlogged_
                    << " connection(s) unread since the last such line, the "
                       "latest from "
                    << peer << ": " << why << "; " << turned_away_.load()
                    << " in all";
  turned_away_unlogged_ = 0;
}

void TcpStoreServer::ReapFinished() {
  std::list<Connection> finished;
  {
    MutexLock lock(&mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      const auto next = std::next(it);
      if (it->finished) finished.splice(finished.end(), connections_, it);
      it = next;
    }
  }
  // Each thread has set `finished` as its last act, so these joins are
  // quick; the sockets close as `finished` goes.
  for (Connection& connection : finished) connection.thread.join();
}

void TcpStoreServer::ServeClient(Connection* connection) {
  StatusOr<Session> session =
      Authenticate(connection->socket, connection->peer);
  {
    MutexLock lock(&mutex_);
    --handshakes_;
    const auto from_host = handshakes_by_host_.find(HostOf(connection->peer));
    if (--from_host->second == 0) handshakes_by_host_.erase(from_host);
  }
  if (session.ok()) Serve(connection->socket, connection->peer, *session);
  // The peer hears the end now; the descriptor stays the server's until
  // ReapFinished or Stop has joined this thread.
  connection->socket.Shutdown();
  MutexLock lock(&mutex_);
  connection->finished = true;
}

void TcpStoreServer::Serve(Socket& client, const std::string& peer,
                           Session& session) {
  const int32_t rank = session.rank;
  MessageAuthenticator& auth = session.auth;
  if (rank >= 0) open_ranks_.fetch_add(1);
  // However the connection ends, the rank is no longer connected.
  struct Leaving {
    std::atomic<int32_t>* open_ranks;
    bool is_rank;
    ~Leaving() {
      if (is_rank) open_ranks->fetch_sub(1);
    }
  } leaving{&open_ranks_, rank >= 0};
  // A rank's connection that ends without a goodbye: its process died.
  auto dropped = [&] {
    if (rank >= 0 && !stopping_.load()) RecordFailure(rank);
  };
  while (!stopping_.load()) {
    StatusOr<std::string> sealed = ReceiveMessage(client, kNoDeadline);
    if (!sealed.ok()) return dropped();
    StatusOr<std::string> request = auth.Open(*sealed);
    if (!request.ok()) {
      // Nothing read from this stream can be trusted any more; say why
      // (sealed, so the client can believe it) and close.
      const std::string who =
          rank >= 0 ? "rank " + std::to_string(rank) : std::string("a client");
      if (!stopping_.load()) {
        KOLO_LOG(WARNING) << "store: closed the connection of " << who
                          << " from " << peer << ": "
                          << request.status().message();
      }
      (void)SendMessage(
          client,
          auth.Seal(Response(Unauthenticated(request.status().message()))),
          DeadlineAfter(std::chrono::seconds(1)));
      return dropped();
    }
    if (!request->empty() &&
        static_cast<Command>((*request)[0]) == Command::kGoodbye) {
      (void)SendMessage(client, auth.Seal(Response(Status::Ok())),
                        DeadlineAfter(std::chrono::seconds(1)));
      return;
    }
    if (!SendMessage(client, auth.Seal(Answer(*request)),
                     DeadlineAfter(kIoSlack))
             .ok()) {
      return dropped();
    }
  }
}

StatusOr<TcpStoreServer::Session> TcpStoreServer::Authenticate(
    Socket& client, const std::string& peer) {
  // The whole handshake must be quick: a silent connection must not hold
  // one of the kStoreMaxHandshakes slots for long.
  const Deadline deadline = DeadlineAfter(kStoreHandshakeTimeout);
  StatusOr<std::string> server_nonce = RandomNonce();
  if (!server_nonce.ok()) {
    KOLO_LOG(ERROR) << "store: cannot challenge the client from " << peer
                    << ": " << server_nonce.status().message();
    return server_nonce.status();
  }
  HandshakeTranscript transcript;
  transcript.magic = kMagic;
  transcript.server_nonce = *server_nonce;
  Status challenged =
      SendMessage(client,
                  Writer()
                      .U8(static_cast<uint8_t>(Command::kChallenge))
                      .Str(kMagic)
                      .Str(transcript.server_nonce)
                      .body(),
                  deadline);
  StatusOr<std::string> hello =
      challenged.ok()
          ? ReceiveMessage(client, deadline, kStoreMaxHandshakeBytes)
          : StatusOr<std::string>(challenged);
  std::string reason;  // why the client is refused; empty when it is not
  if (!hello.ok()) {
    reason = "no valid hello: " + hello.status().message();
  } else {
    Reader r(*hello);
    const auto command = static_cast<Command>(r.U8());
    const std::string magic = r.Str();
    transcript.client_nonce = r.Str();
    transcript.rank = r.I64();
    const std::string proof = r.Str();
    if (!r.ok() || command != Command::kHello || magic != kMagic ||
        transcript.client_nonce.size() != kStoreNonceBytes ||
        transcript.rank < -1 || transcript.rank > INT32_MAX) {
      reason = "malformed hello";
    } else if (!ConstantTimeEqual(proof, ClientProof(secret_, transcript))) {
      reason = "wrong job secret";
    }
  }
  if (!reason.empty()) {
    Refuse(client, peer, reason);
    return Unauthenticated("refused the client from " + peer + ": " + reason);
  }
  // A client that vanishes before it reads this is noticed by ServeClient's
  // first receive, like any rank that dies.
  (void)SendMessage(client,
                    Response(Status::Ok(), ServerProof(secret_, transcript)),
                    deadline);
  return Session{static_cast<int32_t>(transcript.rank),
                 MessageAuthenticator(SessionKey(secret_, transcript),
                                      Direction::kServerToClient)};
}

void TcpStoreServer::Refuse(Socket& client, const std::string& peer,
                            const std::string& reason) {
  rejected_.fetch_add(1);
  bool first_from_host = false;
  {
    MutexLock lock(&mutex_);
    if (refused_hosts_.size() < kMaxRefusedHostsLogged) {
      first_from_host = refused_hosts_.insert(HostOf(peer)).second;
    }
  }
  // Logged before the client hears the verdict, so that a test (or an
  // operator) who sees the refusal also finds its line.
  if (first_from_host && !stopping_.load()) {
    KOLO_LOG(WARNING) << "store: refused a client from " << peer << ": "
                      << reason
                      << " (later refusals from this address are counted, "
                         "not logged)";
  }
  (void)SendMessage(client, Response(Unauthenticated(reason)),
                    DeadlineAfter(std::chrono::seconds(1)));
}

std::string TcpStoreServer::Answer(const std::string& request) {
  Reader r(request);
  switch (static_cast<Command>(r.U8())) {
    case Command::kSet: {
      std::string key = r.Str();
      std::string value = r.Str();
      return Response(r.ok() ? data_.Set(key, value)
                             : InvalidArgument("malformed set"));
    }
    case Command::kGet: {
      std::string key = r.Str();
      int64_t timeout_ms = r.I64();
      if (!r.ok()) return Response(InvalidArgument("malformed get"));
      StatusOr<std::string> value = data_.Get(key, Millis(timeout_ms));
      return value.ok() ? Response(Status::Ok(), *value)
                        : Response(value.status());
    }
    case Command::kAdd: {
      std::string key = r.Str();
      int64_t delta = r.I64();
      if (!r.ok()) return Response(InvalidArgument("malformed add"));
      StatusOr<int64_t> value = data_.Add(key, delta);
      return value.ok() ? Response(Status::Ok(), std::to_string(*value))
                        : Response(value.status());
    }
    case Command::kWait: {
      int64_t count = r.I64();
      std::vector<std::string> keys;
      for (int64_t i = 0; r.ok() && i < count && i < 1000000; ++i) {
        keys.push_back(r.Str());
      }
      int64_t timeout_ms = r.I64();
      return Response(r.ok() ? data_.Wait(keys, Millis(timeout_ms))
                             : InvalidArgument("malformed wait"));
    }
    default: return Response(InvalidArgument("unknown store command"));
  }
}

void TcpStoreServer::RecordFailure(int32_t rank) {
  std::string list;
  {
    MutexLock lock(&mutex_);
    failed_ranks_.push_back(rank);
    for (int32_t r : failed_ranks_) {
      if (!list.empty()) list += ",";
      list += std::to_string(r);
    }
  }
  (void)data_.Set(kFailedRanksKey, list);
}

std::vector<int32_t> TcpStoreServer::FailedRanks() {
  MutexLock lock(&mutex_);
  return failed_ranks_;
}

void TcpStoreServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  data_.Abort("the store is shutting down");
  std::list<Connection> connections;
  {
    MutexLock lock(&mutex_);
    // Every socket here is still open (closed only when its Connection
    // goes, after the join), so each shutdown reaches its own connection.
    for (Connection& connection : connections_) connection.socket.Shutdown();
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
  listener_.Close();
}

// ---------------------------------------------------------------- client

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, const std::string& secret, int32_t rank,
    std::chrono::milliseconds timeout) {
  const std::string server = host + ":" + std::to_string(port);
  KOLO_RETURN_IF_ERROR(
      CheckJobSecret(secret, "the job secret for the store at " + server));
  const Deadline deadline = DeadlineAfter(timeout);
  Status last = Status::Ok();
  // The server may start after its clients (rank 0 hosting it under mpirun),
  // and turns connections away while too many handshakes are in progress:
  // retry both with a growing pause until the deadline.
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    StatusOr<Socket> socket = Socket::Connect(host, port, deadline);
    if (socket.ok()) {
      StatusOr<std::unique_ptr<TcpStoreClient>> client =
          Handshake(std::move(socket).value(), server, secret, rank, deadline);
      if (client.ok() || client.status().code() != StatusCode::kPeerFailure) {
        return client;
      }
      last = client.status();
    } else {
      last = socket.status();
    }
    if (last.code() == StatusCode::kInvalidArgument) return last;
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  return Timeout("could not reach the store at " + server + " within " +
                 std::to_string(timeout.count()) + " ms: " + last.message());
}

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Handshake(
    Socket socket, const std::string& server, const std::string& secret,
    int32_t rank, Deadline deadline) {
  const std::string self =
      rank >= 0 ? "rank " + std::to_string(rank) : std::string("this process");
  StatusOr<std::string> challenge =
      ReceiveMessage(socket, deadline, kStoreMaxHandshakeBytes);
  if (!challenge.ok() &&
      challenge.status().code() == StatusCode::kPeerFailure) {
    // Connect retries this one.
    return PeerFailure("the store at " + server +
                       " closed the connection before its challenge (it "
                       "turns connections away while " +
                       std::to_string(kStoreMaxHandshakes) +
                       " handshakes, or " +
                       std::to_string(kStoreMaxHandshakesPerHost) +
                       " from one address, are in progress)");
  }
  if (!challenge.ok()) {
    return Status(challenge.status().code(),
                  "no challenge from the store at " + server +
                      " (is a kolo store of this version listening there?): " +
                      challenge.status().message());
  }
  HandshakeTranscript transcript;
  transcript.rank = rank;
  {
    Reader r(*challenge);
    const auto command = static_cast<Command>(r.U8());
    transcript.magic = r.Str();
    transcript.server_nonce = r.Str();
    if (!r.ok() || command != Command::kChallenge ||
        transcript.magic != kMagic ||
        transcript.server_nonce.size() != kStoreNonceBytes) {
      return Unauthenticated("the store at " + server +
                             " does not speak the store protocol " + kMagic +
                             " (another program, or another kolo version)");
    }
  }
  KOLO_ASSIGN_OR_RETURN(transcript.client_nonce, RandomNonce());
  const std::string hello = Writer()
                                .U8(static_cast<uint8_t>(Command::kHello))
                                .Str(kMagic)
                                .Str(transcript.client_nonce)
                                .I64(rank)
                                .Str(ClientProof(secret, transcript))
                                .body();
  KOLO_RETURN_IF_ERROR(
      SendMessage(socket, hello, deadline).WithContext("store at " + server));
  StatusOr<std::string> answer =
      ReceiveMessage(socket, deadline, kStoreMaxHandshakeBytes);
  if (!answer.ok()) {
    return Unauthenticated("the store at " + server +
                           " closed the connection during the handshake "
                           "(wrong job secret?): " +
                           answer.status().message());
  }
  Reader r(*answer);
  const auto code = static_cast<StatusCode>(r.U8());
  const std::string message = r.Str();
  const std::string proof = r.Str();
  if (!r.ok()) {
    return Internal("malformed handshake answer from the store at " + server);
  }
  if (code != StatusCode::kOk) {
    return Status(code, "the store at " + server + " refused " + self + ": " +
                            message + " (KOLO_STORE_SECRET)");
  }
  // Mutual: a store that cannot prove it holds the secret gets none of this
  // process's requests (nor its data, nor its trust in the answers).
  if (!ConstantTimeEqual(proof, ServerProof(secret, transcript))) {
    return Unauthenticated("the store at " + server +
                           " could not prove it holds the job secret: an "
                           "impostor, or a store of another job "
                           "(KOLO_STORE_SECRET)");
  }
  return std::unique_ptr<TcpStoreClient>(
      new TcpStoreClient(std::move(socket), server,
                         MessageAuthenticator(SessionKey(secret, transcript),
                                              Direction::kClientToServer)));
}

TcpStoreClient::TcpStoreClient(Socket socket, std::string server,
                               MessageAuthenticator auth)
    : socket_(std::move(socket)),
      auth_(std::move(auth)),
      server_(std::move(server)) {}

TcpStoreClient::~TcpStoreClient() = default;

StatusOr<std::string> TcpStoreClient::Request(
    const std::string& body, std::chrono::milliseconds server_wait) {
  MutexLock lock(&mutex_);
  if (!socket_.valid())
    return Aborted("store client for " + server_ + " is closed");
  const Deadline deadline = DeadlineAfter(server_wait + kIoSlack);
  Status sent = SendMessage(socket_, auth_.Seal(body), deadline);
  StatusOr<std::string> sealed = sent.ok() ? ReceiveMessage(socket_, deadline)
                                           : StatusOr<std::string>(sent);
  StatusOr<std::string> answer = sealed.ok() ? auth_.Open(*sealed) : sealed;
  if (!answer.ok()) {
    socket_.Close();  // the stream is out of step now; fail fast from here on
    return Status(answer.status().code(), "lost the store at " + server_ +
                                              ": " + answer.status().message());
  }
  Reader r(*answer);
  const auto code = static_cast<StatusCode>(r.U8());
  const std::string message = r.Str();
  std::string value = r.Str();
  if (!r.ok()) return Internal("malformed answer from the store at " + server_);
  if (code == StatusCode::kUnauthenticated) {
    // The server found one of this connection's requests forged or altered
    // and has closed it.
    socket_.Close();
    return Status(
        code, "the store at " + server_ + " dropped this client: " + message);
  }
  if (code != StatusCode::kOk) return Status(code, message);
  return value;
}

Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  return Request(Writer()
                     .U8(static_cast<uint8_t>(Command::kSet))
                     .Str(key)
                     .Str(value)
                     .body(),
                 std::chrono::milliseconds(0))
      .status();
}

StatusOr<std::string> TcpStoreClient::Get(const std::string& key,
                                          std::chrono::milliseconds timeout) {
  return Request(Writer()
                     .U8(static_cast<uint8_t>(Command::kGet))
                     .Str(key)
                     .I64(timeout.count())
                     .body(),
                 timeout);
}

StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  KOLO_ASSIGN_OR_RETURN(std::string value,
                        Request(Writer()
                                    .U8(static_cast<uint8_t>(Command::kAdd))
                                    .Str(key)
                                    .I64(delta)
                                    .body(),
                                std::chrono::milliseconds(0)));
  return ParseInt(value, INT64_MIN, INT64_MAX, "store counter '" + key + "'");
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  Writer w;
  w.U8(static_cast<uint8_t>(Command::kWait))
      .I64(static_cast<int64_t>(keys.size()));
  for (const std::string& key : keys) w.Str(key);
  w.I64(timeout.count());
  return Request(w.body(), timeout).status();
}

Status TcpStoreClient::Close() {
  Status status =
      Request(Writer().U8(static_cast<uint8_t>(Command::kGoodbye)).body(),
              std::chrono::milliseconds(0))
          .status();
  MutexLock lock(&mutex_);
  socket_.Close();
  return status;
}

}  // namespace kolo
