#include "link.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "environment.h"
#include "json_file.h"
#include "kolo/kolo.h"
#include "kolo_internal/config.h"
#include "kolo_internal/store.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The store keys of one run. A job runs one link measurement, so fixed
// names under the bench's own prefix cannot meet another's.
constexpr const char* kPartnerAddressKey = "bench/link/partner_address";
constexpr const char* kPartnerHostKey = "bench/link/partner_host";

// ---- Plain sockets ----------------------------------------------------------
// What is measured is TCP itself, so the calls are the bare system calls,
// blocking, with no poll before each one (kolo's own socket layer bounds
// every call by a deadline, which would add a poll to every ping). A dead
// peer still cannot hang the run: SO_RCVTIMEO and SO_SNDTIMEO bound every
// call by the job's timeout.

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

Status Errno(const std::string& what) {
  const int error = errno;
  if (error == EAGAIN || error == EWOULDBLOCK) {
    return Timeout(fmt::format("{}: timed out", what));
  }
  return PeerFailure(fmt::format("{}: {}", what, std::strerror(error)));
}

// `host` (a name or a numeric address) as a socket address, port 0.
StatusOr<sockaddr_storage> Resolve(const std::string& host, socklen_t* length) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgument(fmt::format("cannot resolve '{}' ({}): {}", host,
                                       env::kGlooHostname, gai_strerror(rc)));
  }
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return address;
}

std::string NumericHost(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host,
                    sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "unknown";
  }
  return host;
}

int Port(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

// A TCP socket bound to `host` on a port the OS picks.
StatusOr<Fd> BoundSocket(const std::string& host,
                         std::chrono::milliseconds timeout) {
  socklen_t length = 0;
  KOLO_ASSIGN_OR_RETURN(sockaddr_storage address, Resolve(host, &length));
  Fd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Errno("socket()");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  timeval limit{};
  limit.tv_sec = timeout.count() / 1000;
  limit.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) !=
      0) {
    return Errno(fmt::format("bind({}:0)", host));
  }
  return fd;
}

StatusOr<sockaddr_storage> LocalAddress(const Fd& fd, socklen_t* length) {
  sockaddr_storage address{};
  *length = sizeof(address);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), length) !=
      0) {
    return Errno("getsockname()");
  }
  return address;
}

Status NoDelay(const Fd& fd) {
  const int one = 1;
  if (::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) !=
      0) {
    return Errno("setsockopt(TCP_NODELAY)");
  }
  return Status::Ok();
}

Status SendAll(const Fd& fd, const void* data, int64_t size,
               const std::string& what) {
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(fd.get(), at, size, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return Errno(what);
    }
    at += sent;
    size -= sent;
  }
  return Status::Ok();
}

Status RecvAll(const Fd& fd, void* data, int64_t size,
               const std::string& what) {
  char* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::recv(fd.get(), at, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Errno(what);
    }
    if (got == 0) {
      return PeerFailure(
          fmt::format("{}: the peer closed the connection with "
                      "{} bytes still to come",
                      what, size));
    }
    at += got;
    size -= got;
  }
  return Status::Ok();
}

// The stream's answer: the partner's byte count, 8 bytes little-endian.
void EncodeCount(int64_t count, unsigned char out[8]) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<unsigned char>(static_cast<uint64_t>(count) >> 8 * i);
  }
}

int64_t DecodeCount(const unsigned char in[8]) {
  uint64_t count = 0;
  for (int i = 0; i < 8; ++i) count |= static_cast<uint64_t>(in[i]) << 8 * i;
  return static_cast<int64_t>(count);
}

// Ping i's bytes: one value per ping, so an echo of an earlier ping shows.
unsigned char PingByte(int32_t i) {
  return static_cast<unsigned char>(i * 7 + 1);
}

// ---- The two ends -----------------------------------------------------------

// Rank 0: pings, then streams; fills everything but the endpoints' hosts.
Status MeasureAsInitiator(const LinkConfig& config, const Fd& fd,
                          LinkResult* result) {
  KOLO_RETURN_IF_ERROR(NoDelay(fd));
  std::vector<unsigned char> ping(config.ping_bytes);
  std::vector<unsigned char> echo(config.ping_bytes);
  std::vector<double> seconds;
  seconds.reserve(config.pings);
  for (int32_t i = 0; i < config.warmup + config.pings; ++i) {
    std::fill(ping.begin(), ping.end(), PingByte(i));
    const Clock::time_point start = Clock::now();
    KOLO_RETURN_IF_ERROR(SendAll(fd, ping.data(), config.ping_bytes,
                                 fmt::format("sending ping {}", i)));
    KOLO_RETURN_IF_ERROR(RecvAll(fd, echo.data(), config.ping_bytes,
                                 fmt::format("receiving echo {}", i)));
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (i >= config.warmup) {
      seconds.push_back(elapsed);
      if (echo != ping) ++result->ping_wrong;
    }
  }
  result->ping_bytes = config.ping_bytes;
  result->pings = config.pings;
  result->round_trip = SummarizeRoundTrips(std::move(seconds));

  std::vector<unsigned char> chunk(config.write_bytes);
  for (size_t k = 0; k < chunk.size(); ++k) {
    chunk[k] = static_cast<unsigned char>(k * 13 + 5);
  }
  const auto length = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.seconds));
  const Clock::time_point start = Clock::now();
  const Clock::time_point stop = start + length;
  do {
    KOLO_RETURN_IF_ERROR(SendAll(
        fd, chunk.data(), config.write_bytes,
        fmt::format("streaming (after {} bytes)", result->stream_bytes_sent)));
    result->stream_bytes_sent += config.write_bytes;
    ++result->stream_writes;
  } while (Clock::now() < stop);
  if (::shutdown(fd.get(), SHUT_WR) != 0) {
    return Errno("shutting down the stream's sending side");
  }
  unsigned char answer[8];
  KOLO_RETURN_IF_ERROR(
      RecvAll(fd, answer, sizeof(answer), "receiving the stream's count"));
  result->stream_seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  result->stream_bytes_received = DecodeCount(answer);
  return Status::Ok();
}

// The partner: echoes every ping, then reads the stream to its end and
// answers with what it got.
Status MeasureAsPartner(const LinkConfig& config, const Fd& fd) {
  KOLO_RETURN_IF_ERROR(NoDelay(fd));
  std::vector<unsigned char> ping(config.ping_bytes);
  for (int32_t i = 0; i < config.warmup + config.pings; ++i) {
    KOLO_RETURN_IF_ERROR(RecvAll(fd, ping.data(), config.ping_bytes,
                                 fmt::format("receiving ping {}", i)));
    KOLO_RETURN_IF_ERROR(SendAll(fd, ping.data(), config.ping_bytes,
                                 fmt::format("echoing ping {}", i)));
  }
  std::vector<unsigned char> buffer(
      std::max<int64_t>(config.write_bytes, 4096));
  int64_t received = 0;
  for (;;) {
    const ssize_t got = ::recv(fd.get(), buffer.data(), buffer.size(), 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Errno(
          fmt::format("receiving the stream (after {} bytes)", received));
    }
    if (got == 0) break;
    received += got;
  }
  unsigned char answer[8];
  EncodeCount(received, answer);
  return SendAll(fd, answer, sizeof(answer), "sending the stream's count");
}

// The partner's side of the connection: listen, publish, accept, measure.
Status RunPartner(const LinkConfig& config, const InitOptions& options,
                  Store& store) {
  const std::chrono::milliseconds timeout = options.engine.timeout;
  KOLO_ASSIGN_OR_RETURN(Fd listener,
                        BoundSocket(options.engine.gloo_hostname, timeout));
  if (::listen(listener.get(), 1) != 0) return Errno("listen()");
  socklen_t length = 0;
  KOLO_ASSIGN_OR_RETURN(sockaddr_storage address,
                        LocalAddress(listener, &length));
  const std::string host = NumericHost(address, length);
  const std::string published =
      address.ss_family == AF_INET6
          ? fmt::format("[{}]:{}", host, Port(address))
          : fmt::format("{}:{}", host, Port(address));
  KOLO_RETURN_IF_ERROR(store.Set(kPartnerHostKey, options.world.host_id));
  KOLO_RETURN_IF_ERROR(store.Set(kPartnerAddressKey, published));
  pollfd waiting{listener.get(), POLLIN, 0};
  const int ready = ::poll(&waiting, 1, static_cast<int>(timeout.count()));
  if (ready < 0) return Errno("waiting for rank 0 to connect");
  if (ready == 0) {
    return Timeout(fmt::format("rank 0 did not connect to {} within {} ms ({})",
                               published, timeout.count(),
                               env::kTimeoutSeconds));
  }
  Fd connection(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (connection.get() < 0) return Errno("accept()");
  timeval limit{};
  limit.tv_sec = timeout.count() / 1000;
  limit.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(connection.get(), SOL_SOCKET, SO_RCVTIMEO, &limit,
               sizeof(limit));
  ::setsockopt(connection.get(), SOL_SOCKET, SO_SNDTIMEO, &limit,
               sizeof(limit));
  Status measured = MeasureAsPartner(config, connection);
  if (!measured.ok()) {
    return measured.WithContext(
        fmt::format("link partner rank {} at {}", Rank(), published));
  }
  return Status::Ok();
}

// Rank 0's side: find the partner, connect from its own address, measure.
StatusOr<LinkResult> RunInitiator(const LinkConfig& config,
                                  const InitOptions& options, Store& store,
                                  int32_t partner) {
  const std::chrono::milliseconds timeout = options.engine.timeout;
  KOLO_ASSIGN_OR_RETURN(std::string published,
                        store.Get(kPartnerAddressKey, timeout));
  KOLO_ASSIGN_OR_RETURN(std::string partner_host,
                        store.Get(kPartnerHostKey, timeout));
  std::string host;
  int port = 0;
  KOLO_RETURN_IF_ERROR(ParseHostPortInto(published, &host, &port));
  KOLO_ASSIGN_OR_RETURN(Fd fd,
                        BoundSocket(options.engine.gloo_hostname, timeout));
  socklen_t length = 0;
  KOLO_ASSIGN_OR_RETURN(sockaddr_storage remote, Resolve(host, &length));
  if (remote.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6&>(remote).sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in&>(remote).sin_port = htons(port);
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&remote), length) !=
      0) {
    return Errno(fmt::format("connecting from {} to link partner rank {} at {}",
                             options.engine.gloo_hostname, partner, published));
  }
  LinkResult result;
  socklen_t local_length = 0;
  KOLO_ASSIGN_OR_RETURN(sockaddr_storage local,
                        LocalAddress(fd, &local_length));
  result.local = {0, options.world.host_id, NumericHost(local, local_length)};
  result.peer = {partner, partner_host, host};
  Status measured = MeasureAsInitiator(config, fd, &result);
  if (!measured.ok()) {
    return measured.WithContext(
        fmt::format("link from rank 0 to rank {} at {}", partner, published));
  }
  return result;
}

// The lowest rank whose host differs from rank 0's and that is the first
// rank of its host; -1 when every rank shares rank 0's host.
StatusOr<int32_t> FindPartner() {
  const int32_t n = Size();
  std::vector<int32_t> places(2 * n, 0);
  const int32_t mine[2] = {CrossRank(), LocalRank()};
  KOLO_RETURN_IF_ERROR(Allgather(mine, places.data(), 2, DataType::kInt32));
  for (int32_t r = 1; r < n; ++r) {
    if (places[2 * r] != places[0] && places[2 * r + 1] == 0) return r;
  }
  return -1;
}

void PrintTable(const LinkConfig& config, const LinkResult& result) {
  fmt::print(
      "# kolo-bench link: plain TCP, TCP_NODELAY, between rank {} (host {}, "
      "{}) and rank {} (host {}, {})\n",
      result.local.rank, result.local.host, result.local.address,
      result.peer.rank, result.peer.host, result.peer.address);
  fmt::print(
      "# roundtrip: {} B ping-pong, {} timed after {} warmup; time is the "
      "median, bw = 2 * size / median\n",
      config.ping_bytes, config.pings, config.warmup);
  fmt::print(
      "# stream: one direction, writes of {} B for {} s; time runs to the "
      "partner's count of bytes received\n#\n",
      config.write_bytes, config.seconds);
  const Table table = LinkTable();
  for (const std::string& line : table.HeaderLines()) {
    fmt::print("{}\n", line);
  }
  for (const std::vector<std::string>& row : LinkRows(result)) {
    fmt::print("{}\n", table.Row(row));
  }
  const int64_t wrong = LinkWrong(result);
  fmt::print("# Out of bounds values : {} {}\n#\n", wrong,
             wrong == 0 ? "OK" : "FAILED");
  std::fflush(stdout);
}

// Every rank: who measures, the measurement, the verdict shared at the end.
StatusOr<bool> RunLink(const LinkConfig& config) {
  KOLO_ASSIGN_OR_RETURN(InitOptions options, InitOptions::FromEnvironment());
  KOLO_ASSIGN_OR_RETURN(int32_t partner, FindPartner());
  if (partner < 0) {
    return InvalidArgument(fmt::format(
        "kolo-bench link measures TCP between two hosts, and all {} rank(s) "
        "run on rank 0's host ({}): start it across hosts, e.g. kolorun -H "
        "h1:1,h2:1 kolo-bench link",
        Size(), options.world.host_id));
  }
  const int32_t rank = Rank();
  int64_t wrong = 0;
  std::optional<LinkResult> result;
  if (rank == 0 || rank == partner) {
    if (options.store.host.empty()) {
      return InvalidArgument(fmt::format(
          "kolo-bench link exchanges addresses through the job's store, and "
          "{} is not set: start it with kolorun",
          env::kStoreAddr));
    }
    StatusOr<std::unique_ptr<TcpStoreClient>> store = TcpStoreClient::Connect(
        options.store.host, options.store.port, options.store.secret, rank,
        options.engine.timeout);
    if (!store.ok()) {
      return store.status().WithContext(
          fmt::format("connecting to the store at {}:{} ({})",
                      options.store.host, options.store.port, env::kStoreAddr));
    }
    Status measured;
    if (rank == 0) {
      StatusOr<LinkResult> got =
          RunInitiator(config, options, **store, partner);
      if (got.ok()) {
        result = std::move(got).value();
        wrong = LinkWrong(*result);
      } else {
        measured = got.status();
      }
    } else {
      measured = RunPartner(config, options, **store);
    }
    // A goodbye keeps the store from counting this rank as failed.
    (void)(*store)->Close();
    KOLO_RETURN_IF_ERROR(measured);
  }
  KOLO_RETURN_IF_ERROR(
      Allreduce(&wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum));
  if (rank == 0) {
    PrintTable(config, *result);
    if (wrong != 0) {
      fmt::print(stderr,
                 "kolo-bench: link: {} ping echoes differ from what was sent; "
                 "the stream sent {} bytes and rank {} received {}\n",
                 result->ping_wrong, result->stream_bytes_sent,
                 result->peer.rank, result->stream_bytes_received);
    }
    if (!config.json_path.empty()) {
      nlohmann::json record = LinkToJson(config, Size(), *result);
      record["environment"] = Environment();
      KOLO_RETURN_IF_ERROR(
          AppendJsonRecord(config.json_path, std::move(record)));
    }
  }
  return wrong == 0;
}

}  // namespace

Status ValidateLinkConfig(const LinkConfig& config) {
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--pings", config.pings, 1));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--warmup", config.warmup, 0));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--ping-bytes", config.ping_bytes, 1));
  if (!(config.seconds > 0) || config.seconds > 600) {
    return InvalidArgument(fmt::format(
        "--seconds {} must be above 0 and at most 600", config.seconds));
  }
  if (config.write_bytes < 1 || config.write_bytes > (int64_t{1} << 30)) {
    return InvalidArgument(fmt::format(
        "--write-bytes {} must be from 1 byte to 1G", config.write_bytes));
  }
  return Status::Ok();
}

RoundTripStats SummarizeRoundTrips(std::vector<double> seconds) {
  RoundTripStats stats;
  if (seconds.empty()) return stats;
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  const double median =
      n % 2 == 1 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
  // Nearest rank: the smallest value with at least 90% of them at or below.
  const size_t p90_rank = static_cast<size_t>(std::ceil(0.9 * n));
  double total = 0;
  for (double s : seconds) total += s;
  stats.median_us = median * 1e6;
  stats.min_us = seconds.front() * 1e6;
  stats.p90_us = seconds[std::max<size_t>(p90_rank, 1) - 1] * 1e6;
  stats.mean_us = total / n * 1e6;
  return stats;
}

double RoundTripGbps(const LinkResult& result) {
  if (result.round_trip.median_us <= 0) return 0;
  return 2.0 * result.ping_bytes / (result.round_trip.median_us * 1e-6) / 1e9;
}

double StreamGbps(const LinkResult& result) {
  if (result.stream_seconds <= 0) return 0;
  return static_cast<double>(result.stream_bytes_received) /
         result.stream_seconds / 1e9;
}

int64_t StreamWrong(const LinkResult& result) {
  return std::abs(result.stream_bytes_sent - result.stream_bytes_received);
}

int64_t LinkWrong(const LinkResult& result) {
  return result.ping_wrong + StreamWrong(result);
}

Table LinkTable() {
  return Table({
      {"test", "", 10, "", true},
      {"size", "(B)", 12, "", false},
      {"count", "", 8, "", false},
      {"time", "(us)", 12, "", false},
      {"min", "(us)", 10, "", false},
      {"p90", "(us)", 10, "", false},
      {"bw", "(GB/s)", 8, "", false},
      {"bw", "(Gbit/s)", 9, "", false},
      {"#wrong", "", 6, "", false},
  });
}

std::vector<std::vector<std::string>> LinkRows(const LinkResult& result) {
  const double ping_gbps = RoundTripGbps(result);
  const double stream_gbps = StreamGbps(result);
  return {
      {"roundtrip", std::to_string(result.ping_bytes),
       std::to_string(result.pings),
       FormatFixed(result.round_trip.median_us, 2),
       FormatFixed(result.round_trip.min_us, 2),
       FormatFixed(result.round_trip.p90_us, 2), FormatFixed(ping_gbps, 3),
       FormatFixed(8 * ping_gbps, 3), std::to_string(result.ping_wrong)},
      {"stream", std::to_string(result.stream_bytes_sent),
       std::to_string(result.stream_writes),
       FormatFixed(result.stream_seconds * 1e6, 2), "n/a", "n/a",
       FormatFixed(stream_gbps, 3), FormatFixed(8 * stream_gbps, 3),
       std::to_string(StreamWrong(result))},
  };
}

nlohmann::json LinkToJson(const LinkConfig& config, int32_t world_size,
                          const LinkResult& result) {
  auto endpoint = [](const LinkEndpoint& e) {
    return nlohmann::json{
        {"rank", e.rank}, {"host", e.host}, {"address", e.address}};
  };
  const double stream_gbps = StreamGbps(result);
  return {
      {"benchmark", "link"},
      {"kind", "link"},
      {"np", world_size},
      {"config",
       {{"pings", config.pings},
        {"warmup", config.warmup},
        {"ping_bytes", config.ping_bytes},
        {"seconds", config.seconds},
        {"write_bytes", config.write_bytes}}},
      {"endpoints", {endpoint(result.local), endpoint(result.peer)}},
      {"round_trip",
       {{"bytes", result.ping_bytes},
        {"iters", result.pings},
        {"median_us", result.round_trip.median_us},
        {"min_us", result.round_trip.min_us},
        {"p90_us", result.round_trip.p90_us},
        {"mean_us", result.round_trip.mean_us},
        {"gbps", RoundTripGbps(result)},
        {"wrong", result.ping_wrong}}},
      {"stream",
       {{"bytes_sent", result.stream_bytes_sent},
        {"bytes_received", result.stream_bytes_received},
        {"writes", result.stream_writes},
        {"seconds", result.stream_seconds},
        {"gbps", stream_gbps},
        {"gbit_per_s", 8 * stream_gbps},
        {"wrong", StreamWrong(result)}}},
      {"wrong", LinkWrong(result)},
  };
}

CLI::App* AddLinkCommand(CLI::App& parent, LinkConfig* config) {
  CLI::App* command = parent.add_subcommand(
      "link",
      "Measure plain TCP between rank 0 and the first rank on another host: "
      "the round trip of a small ping-pong and one-way stream bandwidth. "
      "Exit status: 0 all right, 1 error, 2 wrong results.");
  command->add_option("--pings", config->pings, "Timed round trips")
      ->capture_default_str();
  command->add_option("--warmup", config->warmup, "Untimed round trips first")
      ->capture_default_str();
  AddByteSizeFlag(command, "--ping-bytes", &config->ping_bytes,
                  "Bytes each way per round trip (K/M/G suffixes)");
  command
      ->add_option("--seconds", config->seconds, "How long the stream writes")
      ->capture_default_str();
  AddByteSizeFlag(command, "--write-bytes", &config->write_bytes,
                  "Bytes per write of the stream (K/M/G suffixes)");
  AddRankZeroRecordFlag(command, &config->json_path);
  return command;
}

int RunLinkCommand(const LinkConfig& config) {
  Status valid = ValidateLinkConfig(config);
  if (!valid.ok()) return Fail(valid);
  Status init = Init();
  if (!init.ok()) return Fail(init);
  StatusOr<bool> all_right = RunLink(config);
  // Shut down even after an error, so a failed run still leaves the job
  // cleanly; the first error is the one worth reporting.
  Status shutdown = Shutdown();
  if (!all_right.ok()) return Fail(all_right.status());
  if (!shutdown.ok()) return Fail(shutdown);
  return *all_right ? 0 : 2;
}

}  // namespace kolo::bench
