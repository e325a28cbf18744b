#include "transport/tcp_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "common/config.h"
#include "common/hex.h"
#include "common/logging.h"

namespace kolo {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr char kTokenKey[] = "token";
constexpr char kMagic[8] = {'k', 'o', 'l', 'o', '-', 't', 'c', 'p'};
constexpr size_t kTokenBytes = 16;
// magic, sender's rank, the rank it meant to reach, token.
constexpr size_t kHelloBytes = sizeof(kMagic) + 4 + 4 + kTokenBytes;
// Between connection attempts to a listener that refused.
constexpr milliseconds kConnectRetry{20};

using Token = std::array<unsigned char, kTokenBytes>;
using Hello = std::array<unsigned char, kHelloBytes>;

std::string AddressKey(int32_t rank) { return "addr/" + std::to_string(rank); }

StatusOr<Token> NewToken() {
  Token token;
  size_t got = 0;
  while (got < token.size()) {
    const ssize_t n = ::getrandom(token.data() + got, token.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Internal(std::string("cannot draw the mesh token: getrandom: ") +
                      std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return token;
}

Hello MakeHello(int32_t from, int32_t to, const Token& token) {
  Hello hello{};
  std::memcpy(hello.data(), kMagic, sizeof(kMagic));
  const uint32_t from_net = htonl(static_cast<uint32_t>(from));
  const uint32_t to_net = htonl(static_cast<uint32_t>(to));
  std::memcpy(hello.data() + 8, &from_net, 4);
  std::memcpy(hello.data() + 12, &to_net, 4);
  std::memcpy(hello.data() + 16, token.data(), kTokenBytes);
  return hello;
}

// Reads the ranks out of a hello; the reason it is not one of this round's
// (wrong magic or token), or "" when it is. The token is compared in
// constant time.
std::string ReadHello(const Hello& hello, const Token& token, int64_t* from,
                      int64_t* to) {
  if (std::memcmp(hello.data(), kMagic, sizeof(kMagic)) != 0)
    return "not a kolo tcp hello";
  unsigned char difference = 0;
  for (size_t i = 0; i < kTokenBytes; ++i)
    difference |= hello[16 + i] ^ token[i];
  if (difference != 0) return "wrong token";
  uint32_t from_net = 0, to_net = 0;
  std::memcpy(&from_net, hello.data() + 8, 4);
  std::memcpy(&to_net, hello.data() + 12, 4);
  *from = static_cast<int32_t>(ntohl(from_net));
  *to = static_cast<int32_t>(ntohl(to_net));
  return "";
}

// "10.1.0.2:41234" or "[fe80::1]:41234": where `fd` is bound.
std::string LocalAddress(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
}

milliseconds Left(Deadline deadline) {
  return std::max(milliseconds(0),
                  duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string Ranks(const std::vector<int32_t>& ranks) {
  std::string text;
  for (int32_t r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

// Connection attempts to `host`:`port` until one succeeds or `deadline`
// passes: a listener that refuses now may be one whose backlog is full.
StatusOr<Socket> ConnectWithRetries(const std::string& host, int port,
                                    Deadline deadline) {
  while (true) {
    StatusOr<Socket> socket = Socket::Connect(host, port, deadline);
    if (socket.ok() || socket.status().code() == StatusCode::kInvalidArgument)
      return socket;
    if (Clock::now() + kConnectRetry >= deadline) return socket.status();
    std::this_thread::sleep_for(kConnectRetry);
  }
}

// Rank `me` connects to lower rank `peer` and says hello; the answer is
// read later (AwaitAdmission), once `me` has accepted its own higher peers.
StatusOr<Socket> ConnectDown(int32_t me, int32_t peer, const Token& token,
                             const std::string& address, Deadline deadline,
                             milliseconds timeout) {
  std::string host;
  int port = 0;
  Status parsed = ParseHostPortInto(address, &host, &port);
  if (!parsed.ok()) {
    return Internal("rank " + std::to_string(peer) +
                    " published a bad address: " + parsed.message());
  }
  StatusOr<Socket> socket = ConnectWithRetries(host, port, deadline);
  if (!socket.ok()) {
    return Status(socket.status().code(),
                  "rank " + std::to_string(me) + " could not connect to rank " +
                      std::to_string(peer) + " at " + address + " within " +
                      std::to_string(timeout.count()) +
                      " ms: " + socket.status().message());
  }
  const Hello hello = MakeHello(me, peer, token);
  Status sent = socket->SendAll(hello.data(), hello.size(), deadline);
  if (!sent.ok()) {
    return sent.WithContext("rank " + std::to_string(me) +
                            " introducing itself to rank " +
                            std::to_string(peer) + " at " + address);
  }
  return socket;
}

Status AwaitAdmission(int32_t me, int32_t peer, const Token& token,
                      Socket* socket, const std::string& address,
                      Deadline deadline) {
  Hello answer{};
  Status received = socket->RecvAll(answer.data(), answer.size(), deadline);
  if (!received.ok()) {
    return Status(received.code(),
                  "rank " + std::to_string(peer) + " (" + address +
                      ") did not admit rank " + std::to_string(me) +
                      " (a listener of another job, or a token that does not "
                      "match?): " +
                      received.message());
  }
  int64_t from = -1, to = -1;
  std::string wrong = ReadHello(answer, token, &from, &to);
  if (wrong.empty() && (from != peer || to != me)) {
    wrong = "the answer of rank " + std::to_string(from) + " to rank " +
            std::to_string(to);
  }
  if (!wrong.empty()) {
    return PeerFailure("rank " + std::to_string(me) + " reached " + address +
                       ", which is not this job's rank " +
                       std::to_string(peer) + ": " + wrong);
  }
  return Status::Ok();
}

// Rank 0 draws the round's token; the others read it from the store.
StatusOr<Token> AgreeOnToken(int32_t me, Store* store, Deadline deadline,
                             const std::string& self) {
  Token token;
  if (me == 0) {
    KOLO_ASSIGN_OR_RETURN(token, NewToken());
    KOLO_RETURN_IF_ERROR(
        store->Set(kTokenKey, HexEncode(token.data(), token.size())));
    return token;
  }
  StatusOr<std::string> text = store->Get(kTokenKey, Left(deadline));
  if (!text.ok())
    return text.status().WithContext(self + " waiting for rank 0's token");
  if (!HexDecode(*text, token.data(), token.size()))
    return Internal(self + ": the mesh token in the store is malformed");
  return token;
}

// Down: this rank connects to every lower rank, which accepts.
Status ConnectToLowerRanks(const TcpMesh::Options& options, const Token& token,
                           Store* store, Deadline deadline,
                           std::vector<TcpMesh::Connection>* peers) {
  const int32_t me = options.rank;
  for (int32_t peer = 0; peer < me; ++peer) {
    StatusOr<std::string> peer_address =
        store->Get(AddressKey(peer), Left(deadline));
    if (!peer_address.ok()) {
      return peer_address.status().WithContext(
          "rank " + std::to_string(me) + " waiting for rank " +
          std::to_string(peer) + "'s address");
    }
    KOLO_ASSIGN_OR_RETURN(
        (*peers)[peer].socket,
        ConnectDown(me, peer, token, *peer_address, deadline, options.timeout));
    (*peers)[peer].address = *peer_address;
  }
  return Status::Ok();
}

// Up: the higher ranks connect to this rank's listener and say hello.
// Every pending hello is read under one poll, so a connection that says
// nothing holds up no one. A connection whose hello is not one of this
// round's is refused (logged and counted); a right one is answered and
// admitted.
class Admissions {
 public:
  Admissions(const TcpMesh::Options& options, const Token& token,
             std::string address, Deadline deadline,
             std::vector<TcpMesh::Connection>* peers)
      : options_(options),
        token_(token),
        address_(std::move(address)),
        deadline_(deadline),
        self_("rank " + std::to_string(options.rank)),
        peers_(peers),
        admitted_(static_cast<size_t>(options.size), false) {}

  // Returns once every higher rank is admitted; strays still silent then
  // are refused.
  Status AcceptHigherRanks(Socket* listener) {
    int32_t waiting_for = options_.size - 1 - options_.rank;
    while (waiting_for > 0) {
      std::vector<pollfd> fds;
      fds.push_back({listener->fd(), POLLIN, 0});
      for (const Pending& p : pending_) {
        fds.push_back({p.socket.fd(), POLLIN, 0});
      }
      const int ready =
          ::poll(fds.data(), fds.size(), PollTimeoutMs(deadline_));
      if (ready < 0 && errno != EINTR)
        return Internal(self_ + ": poll: " + std::strerror(errno));
      if (ready == 0 && Clock::now() >= deadline_) return TimedOut();
      // Hellos first: `fds` indexes the pending list as it was.
      for (size_t i = pending_.size(); i-- > 0;) {
        if (fds[i + 1].revents == 0) continue;
        KOLO_ASSIGN_OR_RETURN(const bool admitted, ReadPendingHello(i));
        if (admitted) --waiting_for;
      }
      if (fds[0].revents != 0) AcceptAll(*listener);
    }
    for (const Pending& p : pending_) {
      Refuse(p, "no hello before the mesh formed");
    }
    return Status::Ok();
  }

  int32_t refused() const { return refused_; }

 private:
  // An accepted connection whose hello has not fully arrived.
  struct Pending {
    Socket socket;
    std::string address;
    Hello hello{};
    size_t got = 0;
  };

  Status TimedOut() const {
    std::vector<int32_t> missing;
    for (int32_t r = options_.rank + 1; r < options_.size; ++r) {
      if (!admitted_[r]) missing.push_back(r);
    }
    return Timeout(
        self_ + " (" + address_ + ") waited " +
        std::to_string(options_.timeout.count()) + " ms for rank" +
        (missing.size() > 1 ? "s " : " ") + Ranks(missing) + " to connect" +
        (refused_ > 0
             ? " (refused " + std::to_string(refused_) + " other connections)"
             : ""));
  }

  void Refuse(const Pending& p, const std::string& why) {
    ++refused_;
    KOLO_LOG(WARNING) << self_ << " refused a connection from " << p.address
                      << ": " << why;
  }

  // What is wrong with `p`'s complete hello; "" if nothing. Sets `from`.
  std::string Judge(const Pending& p, int64_t* from) const {
    int64_t to = -1;
    std::string wrong = ReadHello(p.hello, token_, from, &to);
    if (!wrong.empty()) return wrong;
    if (to != options_.rank) return "meant for rank " + std::to_string(to);
    if (*from <= options_.rank || *from >= options_.size)
      return "unexpected rank " + std::to_string(*from);
    if (admitted_[*from])
      return "rank " + std::to_string(*from) + " is already connected";
    return "";
  }

  // Reads what arrived of pending_[i]'s hello; once it is complete, admits
  // (true) or refuses the connection.
  StatusOr<bool> ReadPendingHello(size_t i) {
    Pending& p = pending_[i];
    const ssize_t n = ::recv(p.socket.fd(), p.hello.data() + p.got,
                             p.hello.size() - p.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return false;
    if (n <= 0) {
      Refuse(p, "closed before its hello was complete");
      pending_.erase(pending_.begin() + i);
      return false;
    }
    p.got += static_cast<size_t>(n);
    if (p.got < p.hello.size()) return false;
    int64_t from = -1;
    const std::string wrong = Judge(p, &from);
    if (!wrong.empty()) {
      Refuse(p, wrong);
      pending_.erase(pending_.begin() + i);
      return false;
    }
    const Hello answer =
        MakeHello(options_.rank, static_cast<int32_t>(from), token_);
    Status answered = p.socket.SendAll(answer.data(), answer.size(), deadline_);
    if (!answered.ok()) {
      return answered.WithContext(self_ + " admitting rank " +
                                  std::to_string(from) + " (" + p.address +
                                  ")");
    }
    admitted_[from] = true;
    (*peers_)[from].socket = std::move(p.socket);
    (*peers_)[from].address = p.address;
    pending_.erase(pending_.begin() + i);
    return true;
  }

  void AcceptAll(const Socket& listener) {
    while (true) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;  // EAGAIN, or an aborted connection: poll again
      Pending p;
      p.socket = Socket(fd);
      p.address = p.socket.PeerAddress();
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      pending_.push_back(std::move(p));
    }
  }

  const TcpMesh::Options& options_;
  const Token& token_;
  const std::string address_;
  const Deadline deadline_;
  const std::string self_;
  std::vector<TcpMesh::Connection>* const peers_;
  std::vector<bool> admitted_;  // indexed by rank
  std::vector<Pending> pending_;
  int32_t refused_ = 0;
};

}  // namespace

TcpMesh::TcpMesh(const Options& options, std::vector<Connection> peers,
                 int32_t refused)
    : rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout),
      peers_(std::move(peers)),
      refused_(refused) {}

StatusOr<std::unique_ptr<TcpMesh>> TcpMesh::Connect(const Options& options,
                                                    Store* store) {
  const int32_t me = options.rank;
  const std::string self = "rank " + std::to_string(me);
  std::vector<Connection> peers(options.size);
  if (options.size == 1) {
    return std::unique_ptr<TcpMesh>(new TcpMesh(options, std::move(peers), 0));
  }
  const Deadline deadline = DeadlineAfter(options.timeout);

  StatusOr<Socket> listener = Socket::Listen(options.hostname, 0);
  if (!listener.ok()) {
    return listener.status().WithContext(
        self + " cannot listen on " + options.hostname +
        " (KOLO_GLOO_HOSTNAME names the address the engine listens on)");
  }
  const std::string address = LocalAddress(listener->fd());
  KOLO_ASSIGN_OR_RETURN(const Token token,
                        AgreeOnToken(me, store, deadline, self));
  KOLO_RETURN_IF_ERROR(store->Set(AddressKey(me), address));

  KOLO_RETURN_IF_ERROR(
      ConnectToLowerRanks(options, token, store, deadline, &peers));
  Admissions admissions(options, token, address, deadline, &peers);
  KOLO_RETURN_IF_ERROR(admissions.AcceptHigherRanks(&*listener));
  listener->Close();
  // The lower ranks answer once they have accepted their own higher peers.
  for (int32_t peer = 0; peer < me; ++peer) {
    KOLO_RETURN_IF_ERROR(AwaitAdmission(me, peer, token, &peers[peer].socket,
                                        peers[peer].address, deadline));
  }
  return std::unique_ptr<TcpMesh>(
      new TcpMesh(options, std::move(peers), admissions.refused()));
}

std::string TcpMesh::Describe(int32_t peer) const {
  return "rank " + std::to_string(peer) + " (" + peers_[peer].address + ")";
}

std::vector<TcpMesh::Connection> TcpMesh::ReleaseConnections() {
  std::vector<Connection> connections(peers_.size());
  for (size_t r = 0; r < peers_.size(); ++r) {
    connections[r].socket = std::move(peers_[r].socket);
    connections[r].address = peers_[r].address;
  }
  error_ = FailedPrecondition("tcp: rank " + std::to_string(rank_) +
                              " released the mesh's connections");
  return connections;
}

Status TcpMesh::Fail(Status status) {
  error_ = std::move(status);
  for (Connection& peer : peers_) peer.socket.Shutdown();
  return error_;
}

// One direction of a Run: how long its stream is, how far it has moved,
// how far the algorithm lets it go for now, and where in its spans it is.
struct TcpMesh::Cursor {
  int64_t total = 0;
  int64_t done = 0;
  int64_t limit = 0;
  size_t span = 0;
  int64_t offset = 0;  // into `span`
};

Status TcpMesh::Run(const Transfer& transfer, const char* what) {
  if (!error_.ok()) return error_;
  Cursor send, recv;
  if (transfer.to >= 0) {
    for (const SendSpan& span : transfer.send) send.total += span.bytes;
  }
  if (transfer.from >= 0) {
    for (const RecvSpan& span : transfer.recv) recv.total += span.bytes;
  }
  const int out = send.total > 0 ? peers_[transfer.to].socket.fd() : -1;
  const int in = recv.total > 0 ? peers_[transfer.from].socket.fd() : -1;
  auto allow = [&](const Limits& limits) {
    send.limit = std::min(limits.send, send.total);
    recv.limit = std::min(limits.recv, recv.total);
  };
  allow(transfer.progress ? transfer.progress(0, 0) : Limits());
  Clock::time_point last_moved = Clock::now();
  while (send.done < send.total || recv.done < recv.total) {
    KOLO_ASSIGN_OR_RETURN(const bool sent,
                          SendWhatFits(transfer, out, &send, what));
    KOLO_ASSIGN_OR_RETURN(const bool received,
                          ReceiveWhatArrived(transfer, in, &recv, what));
    if (sent || received) {
      if (transfer.progress) allow(transfer.progress(send.done, recv.done));
      last_moved = Clock::now();
      continue;
    }
    KOLO_RETURN_IF_ERROR(
        AwaitSockets(transfer, out, in, send, recv, last_moved, what));
  }
  return Status::Ok();
}

// Sends what the algorithm allows until the socket's buffer is full.
StatusOr<bool> TcpMesh::SendWhatFits(const Transfer& transfer, int fd,
                                     Cursor* send, const char* what) {
  bool moved = false;
  while (send->done < send->limit) {
    const SendSpan& span = transfer.send[send->span];
    if (send->offset == span.bytes) {
      ++send->span;
      send->offset = 0;
      continue;
    }
    const int64_t want =
        std::min(span.bytes - send->offset, send->limit - send->done);
    const ssize_t n =
        ::send(fd, static_cast<const char*>(span.data) + send->offset, want,
               MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      send->done += n;
      send->offset += n;
      moved = true;
      if (n < want) break;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return Fail(PeerFailure(
        Describe(transfer.to) +
        (errno == EPIPE || errno == ECONNRESET
             ? " closed the connection"
             : std::string(" failed: send: ") + std::strerror(errno)) +
        " during " + what));
  }
  return moved;
}

// Receives until the socket is empty or a span is full: the progress
// callback sees each full span before the next one is written.
StatusOr<bool> TcpMesh::ReceiveWhatArrived(const Transfer& transfer, int fd,
                                           Cursor* recv, const char* what) {
  bool moved = false;
  while (recv->done < recv->limit) {
    while (recv->offset == transfer.recv[recv->span].bytes) {
      ++recv->span;
      recv->offset = 0;
    }
    const RecvSpan& span = transfer.recv[recv->span];
    const int64_t want =
        std::min(span.bytes - recv->offset, recv->limit - recv->done);
    const ssize_t n = ::recv(fd, static_cast<char*>(span.data) + recv->offset,
                             want, MSG_DONTWAIT);
    if (n > 0) {
      recv->done += n;
      recv->offset += n;
      moved = true;
      if (n < want || recv->offset == span.bytes) break;
      continue;
    }
    if (n == 0) {
      return Fail(PeerFailure(Describe(transfer.from) +
                              " closed the connection during " + what));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    // A reset is a close with data still unread on the peer's side.
    return Fail(PeerFailure(
        Describe(transfer.from) +
        (errno == ECONNRESET
             ? " closed the connection"
             : std::string(" failed: recv: ") + std::strerror(errno)) +
        " during " + what));
  }
  return moved;
}

// Nothing moved: sleeps until a socket is ready, or fails once the peer
// has been silent for the timeout since `last_moved`.
Status TcpMesh::AwaitSockets(const Transfer& transfer, int out, int in,
                             const Cursor& send, const Cursor& recv,
                             Clock::time_point last_moved, const char* what) {
  const bool want_send = send.done < send.limit;
  const bool want_recv = recv.done < recv.limit;
  if (!want_send && !want_recv) {
    return Fail(Internal(
        std::string("tcp ") + what + ": the algorithm holds the send at " +
        std::to_string(send.done) + " of " + std::to_string(send.total) +
        " bytes and the receive at " + std::to_string(recv.done) + " of " +
        std::to_string(recv.total)));
  }
  pollfd fds[2];
  nfds_t count = 0;
  if (want_send && want_recv && out == in) {
    fds[count++] = {out, POLLIN | POLLOUT, 0};
  } else {
    if (want_send) fds[count++] = {out, POLLOUT, 0};
    if (want_recv) fds[count++] = {in, POLLIN, 0};
  }
  // A peer already on its way answers within microseconds, sooner than a
  // sleeping thread is woken: spin briefly first (common/spin_wait.h). The
  // spin yields the core at every turn, since the peer (or the kernel's
  // network processing) may need it.
  const Clock::time_point began = Clock::now();
  if (spin_.Spin([&] { return ::poll(fds, count, 0) != 0; }, SpinStyle::kYield,
                 began)) {
    spin_.Finished(began);
    return Status::Ok();
  }
  const int ready = ::poll(fds, count, PollTimeoutMs(last_moved + timeout_));
  spin_.Finished(began);
  if (ready < 0 && errno != EINTR) {
    return Fail(Internal(std::string("tcp ") + what +
                         ": poll: " + std::strerror(errno)));
  }
  if (ready == 0 && Clock::now() >= last_moved + timeout_) {
    const std::string silence =
        " for " + std::to_string(timeout_.count()) + " ms during " + what;
    return Fail(
        want_recv ? Timeout(Describe(transfer.from) + " sent nothing" + silence)
                  : Timeout(Describe(transfer.to) + " took no data" + silence));
  }
  return Status::Ok();
}

}  // namespace kolo
