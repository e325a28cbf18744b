#include "store/tcp_store.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/config.h"
#include "common/logging.h"

namespace kolo {
namespace {

constexpr char kMagic[] = "KOLO-STORE-1";
constexpr uint32_t kMaxMessageBytes = 64u << 20;
constexpr std::chrono::seconds kHelloTimeout{10};
// Slack on top of a server-side wait, for the request and response to travel.
constexpr std::chrono::seconds kIoSlack{10};
const Deadline kNoDeadline = Clock::time_point::max();

enum class Command : uint8_t { kHello = 1, kSet, kGet, kAdd, kWait, kGoodbye };

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

StatusOr<std::string> ReceiveMessage(Socket& socket, Deadline deadline) {
  uint32_t length = 0;
  KOLO_RETURN_IF_ERROR(socket.RecvAll(&length, sizeof(length), deadline));
  if (length > kMaxMessageBytes) {
    return InvalidArgument("message of " + std::to_string(length) +
                           " bytes is larger than the limit");
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

bool SecretsEqual(const std::string& a, const std::string& b) {
  // Constant time in the content, so timing does not reveal a prefix.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i) {
    unsigned char x = i < a.size() ? a[i] : 0;
    unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::chrono::milliseconds Millis(int64_t ms) {
  return std::chrono::milliseconds(std::max<int64_t>(ms, 0));
}

}  // namespace

// ---------------------------------------------------------------- server

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const std::string& host, int port, std::string secret) {
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
  while (!stopping_.load()) {
    // A short accept deadline lets the loop notice Stop() without a pipe.
    StatusOr<Socket> client =
        listener_.Accept(DeadlineAfter(std::chrono::milliseconds(100)));
    if (!client.ok()) continue;
    MutexLock lock(&mutex_);
    if (stopping_.load()) break;
    client_fds_.push_back(client->fd());
    client_threads_.emplace_back(
        [this, c = std::move(client).value()]() mutable {
          ServeClient(std::move(c));
        });
  }
}

void TcpStoreServer::ServeClient(Socket client) {
  const std::string peer = client.PeerAddress();
  StatusOr<int32_t> rank = Authenticate(client, peer);
  if (!rank.ok()) {
    client.Shutdown();
    return;
  }
  // A rank's connection that ends without a goodbye: its process died.
  auto dropped = [&] {
    if (*rank >= 0 && !stopping_.load()) RecordFailure(*rank);
  };
  while (!stopping_.load()) {
    StatusOr<std::string> request = ReceiveMessage(client, kNoDeadline);
    if (!request.ok()) return dropped();
    if (!request->empty() &&
        static_cast<Command>((*request)[0]) == Command::kGoodbye) {
      (void)SendMessage(client, Response(Status::Ok()),
                        DeadlineAfter(std::chrono::seconds(1)));
      return;
    }
    if (!SendMessage(client, Answer(*request), DeadlineAfter(kIoSlack)).ok()) {
      return dropped();
    }
  }
}

StatusOr<int32_t> TcpStoreServer::Authenticate(Socket& client,
                                               const std::string& peer) {
  // The hello must come quickly and carry the job's secret.
  StatusOr<std::string> hello =
      ReceiveMessage(client, DeadlineAfter(kHelloTimeout));
  int32_t rank = -1;
  Status verdict = Status::Ok();
  if (!hello.ok()) {
    verdict = Unauthenticated("no valid hello from " + peer + ": " +
                              hello.status().message());
  } else {
    Reader r(*hello);
    const auto command = static_cast<Command>(r.U8());
    const std::string magic = r.Str();
    const std::string secret = r.Str();
    rank = static_cast<int32_t>(r.I64());
    if (!r.ok() || command != Command::kHello || magic != kMagic) {
      verdict = Unauthenticated("malformed hello from " + peer);
    } else if (!SecretsEqual(secret, secret_)) {
      verdict = Unauthenticated("wrong job secret from " + peer);
    }
  }
  if (!verdict.ok()) {
    rejected_.fetch_add(1);
    if (!stopping_.load()) {
      KOLO_LOG(WARNING) << "store rejected a connection: " << verdict.message();
    }
    (void)SendMessage(client, Response(verdict),
                      DeadlineAfter(std::chrono::seconds(1)));
    return verdict;
  }
  (void)SendMessage(client, Response(Status::Ok()),
                    DeadlineAfter(kHelloTimeout));
  return rank;
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
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mutex_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(client_threads_);
  }
  for (std::thread& t : threads) t.join();
  listener_.Close();
}

// ---------------------------------------------------------------- client

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, const std::string& secret, int32_t rank,
    std::chrono::milliseconds timeout) {
  const std::string server = host + ":" + std::to_string(port);
  const Deadline deadline = DeadlineAfter(timeout);
  Status last = Status::Ok();
  // The server may start after its clients (rank 0 hosting it under mpirun):
  // retry refused connections with a growing pause until the deadline.
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    StatusOr<Socket> socket = Socket::Connect(host, port, deadline);
    if (socket.ok()) {
      const std::string hello = Writer()
                                    .U8(static_cast<uint8_t>(Command::kHello))
                                    .Str(kMagic)
                                    .Str(secret)
                                    .I64(rank)
                                    .body();
      KOLO_RETURN_IF_ERROR(SendMessage(*socket, hello, deadline)
                               .WithContext("store at " + server));
      StatusOr<std::string> answer = ReceiveMessage(*socket, deadline);
      if (!answer.ok()) {
        return Unauthenticated("store at " + server +
                               " closed the connection during the hello (wrong "
                               "secret?): " +
                               answer.status().message());
      }
      Reader r(*answer);
      const auto code = static_cast<StatusCode>(r.U8());
      const std::string message = r.Str();
      if (!r.ok())
        return Internal("malformed hello answer from store at " + server);
      if (code != StatusCode::kOk) {
        return Status(code, "store at " + server + " refused rank " +
                                std::to_string(rank) + ": " + message);
      }
      return std::unique_ptr<TcpStoreClient>(
          new TcpStoreClient(std::move(socket).value(), server));
    }
    last = socket.status();
    if (last.code() == StatusCode::kInvalidArgument) return last;
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  return Timeout("could not reach the store at " + server + " within " +
                 std::to_string(timeout.count()) + " ms: " + last.message());
}

TcpStoreClient::TcpStoreClient(Socket socket, std::string server)
    : socket_(std::move(socket)), server_(std::move(server)) {}

TcpStoreClient::~TcpStoreClient() = default;

StatusOr<std::string> TcpStoreClient::Request(
    const std::string& body, std::chrono::milliseconds server_wait) {
  MutexLock lock(&mutex_);
  if (!socket_.valid())
    return Aborted("store client for " + server_ + " is closed");
  const Deadline deadline = DeadlineAfter(server_wait + kIoSlack);
  Status sent = SendMessage(socket_, body, deadline);
  StatusOr<std::string> answer = sent.ok() ? ReceiveMessage(socket_, deadline)
                                           : StatusOr<std::string>(sent);
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
