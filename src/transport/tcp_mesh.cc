#include "transport/tcp_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
#include "store/message_auth.h"

namespace kolo {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr char kRoundKey[] = "round";
constexpr char kMagic[8] = {'k', 'o', 'l', 'o', '-', 't', 'c', 'p'};
constexpr size_t kRoundBytes = kStoreNonceBytes;
// magic, sender's rank, the rank it meant to reach, round, sender's nonce.
constexpr size_t kHelloBytes =
    sizeof(kMagic) + 4 + 4 + kRoundBytes + kStoreNonceBytes;
// The listener's answer to a hello: a hello of its own, then its proof.
constexpr size_t kChallengeBytes = kHelloBytes + kStoreTagBytes;
constexpr size_t kProofBytes = kStoreTagBytes;
constexpr unsigned char kAdmitted = 1;
// Between connection attempts to a listener that refused.
constexpr milliseconds kConnectRetry{20};
// Connections a listener holds before they are admitted. A new one beyond
// it displaces the oldest, so a flood of connections costs a bounded number
// of descriptors and bytes, and a real peer, whose handshake takes one
// round trip, is not shut out by strays that came before it.
constexpr size_t kMaxPendingConnections = 64;
// A connection not admitted by then is dropped: a real peer sends its
// hello as soon as it connects and its proof one round trip later.
constexpr milliseconds kHandshakeWait{5000};
// How long the listener is left unpolled when the process is out of
// descriptors and has none in reserve to accept and close a connection.
constexpr milliseconds kAcceptBackoff{50};

std::string AddressKey(int32_t rank) { return "addr/" + std::to_string(rank); }

// A hello as it travels. `round` tells this round's ranks from a rank of an
// older round still retrying; it is public (the store holds it). The nonce
// makes the connection's proofs its own.
struct Hello {
  int32_t from = -1;
  int32_t to = -1;
  std::string round;
  std::string nonce;
};

void PutRank(int32_t rank, char* out) {
  const uint32_t net = htonl(static_cast<uint32_t>(rank));
  std::memcpy(out, &net, 4);
}

int32_t GetRank(const char* in) {
  uint32_t net = 0;
  std::memcpy(&net, in, 4);
  return static_cast<int32_t>(ntohl(net));
}

std::string EncodeHello(const Hello& hello) {
  std::string bytes(kHelloBytes, '\0');
  std::memcpy(&bytes[0], kMagic, sizeof(kMagic));
  PutRank(hello.from, &bytes[8]);
  PutRank(hello.to, &bytes[12]);
  bytes.replace(16, kRoundBytes, hello.round);
  bytes.replace(16 + kRoundBytes, kStoreNonceBytes, hello.nonce);
  return bytes;
}

// Reads the kHelloBytes at `bytes`; the reason it is not one of this
// round's (wrong magic or round), or "" when it is.
std::string DecodeHello(const char* bytes, const std::string& round,
                        Hello* hello) {
  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return "not a kolo tcp hello";
  hello->round.assign(bytes + 16, kRoundBytes);
  if (hello->round != round) return "a hello of another round";
  hello->from = GetRank(bytes + 8);
  hello->to = GetRank(bytes + 12);
  hello->nonce.assign(bytes + 16 + kRoundBytes, kStoreNonceBytes);
  return "";
}

// What both ends of connector -> listener prove the job secret over (store/
// message_auth.h): the round and the listener's rank in the magic, the
// listener's nonce as the server's, the connector's nonce and rank as the
// client's. A proof therefore holds for one connection, one pair of ranks
// and one round.
HandshakeTranscript Transcript(const std::string& round, int32_t listener,
                               const std::string& listener_nonce,
                               int32_t connector,
                               const std::string& connector_nonce) {
  HandshakeTranscript transcript;
  transcript.magic = "kolo tcp mesh, round " +
                     HexEncode(round.data(), round.size()) +
                     ", listener rank " + std::to_string(listener);
  transcript.server_nonce = listener_nonce;
  transcript.client_nonce = connector_nonce;
  transcript.rank = connector;
  return transcript;
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

// What a rank needs to prove itself to the others of its round.
struct Credentials {
  std::string secret;  // the job's; never sent
  std::string round;   // this round's, from the store
};

// The rest of `me`'s handshake with lower rank `peer` (ConnectDown):
// reads its challenge, checks its proof of the secret, answers with this rank's
// proof and waits for the verdict.
Status AwaitAdmission(int32_t me, int32_t peer, const Credentials& credentials,
                      const std::string& nonce, Socket* socket,
                      const std::string& address, Deadline deadline) {
  const std::string self = "rank " + std::to_string(me);
  const std::string other =
      "rank " + std::to_string(peer) + " (" + address + ")";
  std::string challenge(kChallengeBytes, '\0');
  Status received = socket->RecvAll(&challenge[0], challenge.size(), deadline);
  if (!received.ok()) {
    return Status(
        received.code(),
        other + " did not answer the hello of " + self +
            " (a listener of another job or round?): " + received.message());
  }
  Hello answer;
  std::string wrong = DecodeHello(challenge.data(), credentials.round, &answer);
  if (wrong.empty() && (answer.from != peer || answer.to != me)) {
    wrong = "the answer of rank " + std::to_string(answer.from) + " to rank " +
            std::to_string(answer.to);
  }
  const HandshakeTranscript transcript =
      Transcript(credentials.round, peer, answer.nonce, me, nonce);
  if (wrong.empty() &&
      !ConstantTimeEqual(challenge.substr(kHelloBytes),
                         ServerProof(credentials.secret, transcript))) {
    wrong = "it could not prove it holds the job secret";
  }
  if (!wrong.empty()) {
    return PeerFailure(self + " reached " + address +
                       ", which is not this job's rank " +
                       std::to_string(peer) + ": " + wrong);
  }
  const std::string proof = ClientProof(credentials.secret, transcript);
  KOLO_RETURN_IF_ERROR(socket->SendAll(proof.data(), proof.size(), deadline)
                           .WithContext(self + " proving itself to " + other));
  unsigned char verdict = 0;
  Status admitted = socket->RecvAll(&verdict, 1, deadline);
  if (!admitted.ok() || verdict != kAdmitted) {
    return PeerFailure(other + " refused " + self +
                       " (not the same job secret, KOLO_STORE_SECRET?)" +
                       (admitted.ok() ? "" : ": " + admitted.message()));
  }
  return Status::Ok();
}

// Rank `me` connects to lower rank `peer`, says hello with a fresh nonce
// and goes through the handshake. `peer` answers from its accept loop,
// which it reaches once done with its own lower peers: by induction from
// rank 0, which accepts at once, no rank waits on one that waits on it.
StatusOr<Socket> ConnectDown(int32_t me, int32_t peer,
                             const Credentials& credentials,
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
  KOLO_ASSIGN_OR_RETURN(const std::string nonce, RandomNonce());
  const std::string hello = EncodeHello({me, peer, credentials.round, nonce});
  Status sent = socket->SendAll(hello.data(), hello.size(), deadline);
  if (!sent.ok()) {
    return sent.WithContext("rank " + std::to_string(me) +
                            " introducing itself to rank " +
                            std::to_string(peer) + " at " + address);
  }
  KOLO_RETURN_IF_ERROR(AwaitAdmission(me, peer, credentials, nonce, &*socket,
                                      address, deadline));
  return socket;
}

// Rank 0 draws the round's id; the others read it from the store.
StatusOr<std::string> AgreeOnRound(int32_t me, Store* store, Deadline deadline,
                                   const std::string& self) {
  if (me == 0) {
    KOLO_ASSIGN_OR_RETURN(std::string round, RandomNonce());
    KOLO_RETURN_IF_ERROR(
        store->Set(kRoundKey, HexEncode(round.data(), round.size())));
    return round;
  }
  StatusOr<std::string> text = store->Get(kRoundKey, Left(deadline));
  if (!text.ok())
    return text.status().WithContext(self + " waiting for rank 0's round");
  std::string round(kRoundBytes, '\0');
  if (!HexDecode(*text, &round[0], round.size()))
    return Internal(self + ": the mesh round in the store is malformed");
  return round;
}

// Down: this rank connects to every lower rank, which accepts.
Status ConnectToLowerRanks(const TcpMesh::Options& options,
                           const Credentials& credentials, Store* store,
                           Deadline deadline,
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
    KOLO_ASSIGN_OR_RETURN((*peers)[peer].socket,
                          ConnectDown(me, peer, credentials, *peer_address,
                                      deadline, options.timeout));
    (*peers)[peer].address = *peer_address;
  }
  return Status::Ok();
}

// A descriptor held back so that a listener in a process out of
// descriptors can still accept a connection, to close it: left in the
// backlog it would keep the listener readable, and the poll loop would
// spin. Servers do the same (nginx, libuv's "reserve fd").
class ReserveDescriptor {
 public:
  ReserveDescriptor() { Take(); }
  ~ReserveDescriptor() { Release(); }
  ReserveDescriptor(const ReserveDescriptor&) = delete;
  ReserveDescriptor& operator=(const ReserveDescriptor&) = delete;

  bool held() const { return fd_ >= 0; }
  void Take() {
    if (fd_ < 0) fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  void Release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Up: the higher ranks connect to this rank's listener and prove the job
// secret. Every pending connection is served under one poll, so one that
// says nothing holds up no one. Each moves through two steps: its hello
// (this round, meant for this rank, a rank not yet admitted) is answered
// with this rank's challenge; its proof, if right, admits it. Anything
// else is refused: logged, counted and closed. At most
// kMaxPendingConnections wait at once, each has kHandshakeWait to finish,
// and a process out of descriptors sheds connections instead of spinning.
class Admissions {
 public:
  Admissions(const TcpMesh::Options& options, const Credentials& credentials,
             std::string address, Deadline deadline,
             std::vector<TcpMesh::Connection>* peers)
      : options_(options),
        credentials_(credentials),
        address_(std::move(address)),
        deadline_(deadline),
        self_("rank " + std::to_string(options.rank)),
        peers_(peers),
        admitted_(static_cast<size_t>(options.size), false) {}

  // Returns once every higher rank is admitted; strays still pending then
  // are refused.
  Status AcceptHigherRanks(Socket* listener) {
    int32_t waiting_for = options_.size - 1 - options_.rank;
    while (waiting_for > 0) {
      const Clock::time_point now = Clock::now();
      DropStaleConnections(now);
      std::vector<pollfd> fds;
      const bool listening = now >= accept_paused_until_;
      fds.push_back({listening ? listener->fd() : -1, POLLIN, 0});
      for (const Pending& p : pending_) {
        fds.push_back({p.socket.fd(), POLLIN, 0});
      }
      const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(WakeAt()));
      if (ready < 0 && errno != EINTR)
        return Internal(self_ + ": poll: " + std::strerror(errno));
      // Whether or not something is ready: a stream of strangers must not
      // keep this loop past its deadline.
      if (Clock::now() >= deadline_) return TimedOut();
      // Pending connections first: `fds` indexes the list as it was.
      for (size_t i = pending_.size(); i-- > 0;) {
        if (fds[i + 1].revents == 0) continue;
        KOLO_ASSIGN_OR_RETURN(const bool admitted, ServePending(i));
        if (admitted) --waiting_for;
      }
      if (listening && fds[0].revents != 0) AcceptAll(*listener);
    }
    for (const Pending& p : pending_) {
      Refuse(p.address, "not admitted before the mesh formed");
    }
    return Status::Ok();
  }

  int32_t refused() const { return refused_; }

 private:
  // An accepted connection not yet admitted: its hello or its proof is
  // still arriving.
  struct Pending {
    Socket socket;
    std::string address;
    Clock::time_point accepted;
    bool challenged = false;  // its hello was answered; the proof is next
    std::string bytes;        // what arrived of the current step
    size_t got = 0;
    int32_t from = -1;
    HandshakeTranscript transcript;
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

  void Refuse(const std::string& address, const std::string& why) {
    ++refused_;
    KOLO_LOG(WARNING) << self_ << " refused a connection from " << address
                      << ": " << why;
  }

  // The poll's end: the deadline, the next silent hello's, or the end of
  // a pause of the listener.
  Deadline WakeAt() const {
    Deadline wake = deadline_;
    for (const Pending& p : pending_) {
      wake = std::min(wake, p.accepted + kHandshakeWait);
    }
    if (Clock::now() < accept_paused_until_)
      wake = std::min(wake, accept_paused_until_);
    return wake;
  }

  void DropStaleConnections(Clock::time_point now) {
    for (size_t i = pending_.size(); i-- > 0;) {
      const Pending& p = pending_[i];
      if (now < p.accepted + kHandshakeWait) continue;
      Refuse(p.address, "no handshake within " +
                            std::to_string(kHandshakeWait.count()) + " ms");
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    }
  }

  // What is wrong with `hello` for this rank; "" if nothing.
  std::string Judge(const Hello& hello) const {
    if (hello.to != options_.rank)
      return "meant for rank " + std::to_string(hello.to);
    if (hello.from <= options_.rank || hello.from >= options_.size)
      return "unexpected rank " + std::to_string(hello.from);
    if (admitted_[hello.from])
      return "rank " + std::to_string(hello.from) + " is already connected";
    return "";
  }

  // Reads what arrived of pending_[i]'s current step, never more than the
  // step's length; once the step is complete, takes it. True when the
  // connection was admitted.
  StatusOr<bool> ServePending(size_t i) {
    Pending& p = pending_[i];
    const bool proving = p.challenged;
    const size_t need = proving ? kProofBytes : kHelloBytes;
    p.bytes.resize(need);
    const ssize_t n =
        ::recv(p.socket.fd(), &p.bytes[p.got], need - p.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return false;
    std::string wrong;
    if (n <= 0) {
      wrong = "closed before its handshake was complete";
    } else {
      p.got += static_cast<size_t>(n);
      if (p.got < need) return false;
      wrong = proving ? TakeProof(&p) : TakeHello(&p);
    }
    if (!wrong.empty()) {
      Refuse(p.address, wrong);
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      return false;
    }
    if (!proving) return false;  // challenged; its proof comes next
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    return true;
  }

  // A complete hello: answers it with this rank's challenge; the reason to
  // refuse the connection, or "".
  std::string TakeHello(Pending* p) {
    Hello hello;
    std::string wrong =
        DecodeHello(p->bytes.data(), credentials_.round, &hello);
    if (wrong.empty()) wrong = Judge(hello);
    if (!wrong.empty()) return wrong;
    StatusOr<std::string> nonce = RandomNonce();
    if (!nonce.ok()) return nonce.status().message();
    p->from = hello.from;
    p->transcript = Transcript(credentials_.round, options_.rank, *nonce,
                               hello.from, hello.nonce);
    const std::string challenge =
        EncodeHello({options_.rank, hello.from, credentials_.round, *nonce}) +
        ServerProof(credentials_.secret, p->transcript);
    Status sent =
        p->socket.SendAll(challenge.data(), challenge.size(),
                          std::min(deadline_, DeadlineAfter(kHandshakeWait)));
    if (!sent.ok()) return "cannot answer its hello: " + sent.message();
    p->challenged = true;
    p->got = 0;
    return "";
  }

  // A complete proof: admits the connection if it proves the job secret
  // for its own transcript; the reason to refuse it, or "".
  std::string TakeProof(Pending* p) {
    if (!ConstantTimeEqual(p->bytes,
                           ClientProof(credentials_.secret, p->transcript)))
      return "rank " + std::to_string(p->from) +
             " did not prove the job secret";
    if (admitted_[p->from])
      return "rank " + std::to_string(p->from) + " is already connected";
    Status answered = p->socket.SendAll(&kAdmitted, 1, deadline_);
    if (!answered.ok()) return "cannot admit it: " + answered.message();
    admitted_[p->from] = true;
    (*peers_)[p->from].socket = std::move(p->socket);
    (*peers_)[p->from].address = p->address;
    return "";
  }

  void AcceptAll(const Socket& listener) {
    while (true) {
      const int fd = ::accept4(listener.fd(), nullptr, nullptr,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) ShedConnection(listener);
        return;  // EAGAIN, or an aborted connection: poll again
      }
      if (pending_.size() >= kMaxPendingConnections) {
        Refuse(pending_.front().address,
               "displaced by a newer connection, " +
                   std::to_string(kMaxPendingConnections) +
                   " being pending already");
        pending_.erase(pending_.begin());
      }
      Pending p;
      p.socket = Socket(fd);
      p.address = p.socket.PeerAddress();
      p.accepted = Clock::now();
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      pending_.push_back(std::move(p));
    }
  }

  // The process is out of descriptors: accepts one connection on the
  // reserve to close it, or, with no reserve, leaves the listener alone
  // for kAcceptBackoff.
  void ShedConnection(const Socket& listener) {
    const std::string why = std::string(
                                "this process is out of file "
                                "descriptors (") +
                            std::strerror(errno) + ")";
    reserve_.Release();
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Refuse(Socket(fd).PeerAddress(), why);
    } else {
      accept_paused_until_ = Clock::now() + kAcceptBackoff;
    }
    reserve_.Take();
    if (!reserve_.held()) accept_paused_until_ = Clock::now() + kAcceptBackoff;
  }

  const TcpMesh::Options& options_;
  const Credentials& credentials_;
  const std::string address_;
  const Deadline deadline_;
  const std::string self_;
  std::vector<TcpMesh::Connection>* const peers_;
  std::vector<bool> admitted_;  // indexed by rank
  std::vector<Pending> pending_;
  ReserveDescriptor reserve_;
  Clock::time_point accept_paused_until_;
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
  KOLO_RETURN_IF_ERROR(CheckJobSecret(
      options.job_secret, "the tcp engine of " + self +
                              " (its mesh admits "
                              "only ranks that prove the job secret)"));
  const Deadline deadline = DeadlineAfter(options.timeout);

  StatusOr<Socket> listener = Socket::Listen(options.hostname, 0);
  if (!listener.ok()) {
    return listener.status().WithContext(
        self + " cannot listen on " + options.hostname +
        " (KOLO_GLOO_HOSTNAME names the address the engine listens on)");
  }
  const std::string address = LocalAddress(listener->fd());
  Credentials credentials;
  credentials.secret = options.job_secret;
  KOLO_ASSIGN_OR_RETURN(credentials.round,
                        AgreeOnRound(me, store, deadline, self));
  KOLO_RETURN_IF_ERROR(store->Set(AddressKey(me), address));

  KOLO_RETURN_IF_ERROR(
      ConnectToLowerRanks(options, credentials, store, deadline, &peers));
  Admissions admissions(options, credentials, address, deadline, &peers);
  KOLO_RETURN_IF_ERROR(admissions.AcceptHigherRanks(&*listener));
  listener->Close();
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
