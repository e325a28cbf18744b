#include "metrics_scraper.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>

#include "kolo_internal/net.h"

namespace kolo {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The body's size of GET /metrics, or -1 when the job does not answer.
int64_t ScrapeOnce(int port) {
  Deadline deadline = DeadlineAfter(std::chrono::seconds(5));
  StatusOr<Socket> socket = Socket::Connect("127.0.0.1", port, deadline);
  if (!socket.ok()) return -1;
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: kolo-bench\r\n\r\n";
  if (!socket->SendAll(request.data(), request.size(), deadline).ok()) {
    return -1;
  }
  std::string reply;
  char buffer[4096];
  // The server closes after its answer: read what arrives until the close
  // (the socket does not block; poll waits, up to the deadline).
  while (true) {
    pollfd ready{socket->fd(), POLLIN, 0};
    if (poll(&ready, 1, PollTimeoutMs(deadline)) <= 0) return -1;
    ssize_t n = recv(socket->fd(), buffer, sizeof(buffer), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  size_t split = reply.find("\r\n\r\n");
  if (reply.compare(0, 12, "HTTP/1.1 200") != 0 || split == std::string::npos) {
    return -1;
  }
  return static_cast<int64_t>(reply.size() - split - 4);
}

}  // namespace

int MetricsPortIn(const std::string& text) {
  static const std::regex url("metrics at http://[^ ]+:([0-9]+)/metrics");
  std::smatch match;
  if (!std::regex_search(text, match, url)) return 0;
  return std::stoi(match[1]);
}

MetricsScraper::MetricsScraper(std::string log,
                               std::chrono::milliseconds period)
    : log_(std::move(log)), period_(period) {
  thread_ = std::thread([this] { Run(); });
}

MetricsScraper::~MetricsScraper() { Stop(); }

ScrapeCount MetricsScraper::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return count_;
}

void MetricsScraper::Run() {
  int port = 0;
  Clock::time_point next = Clock::now();
  while (!stop_) {
    if (port == 0) {
      port = MetricsPortIn(ReadLog(log_));
      next = Clock::now();
    }
    if (port != 0 && Clock::now() >= next) {
      const Clock::time_point start = Clock::now();
      const int64_t bytes = ScrapeOnce(port);
      if (bytes >= 0) {
        ++count_.scrapes;
        count_.bytes += bytes;
        count_.slowest_seconds = std::max(
            count_.slowest_seconds,
            std::chrono::duration<double>(Clock::now() - start).count());
      }
      next = start + period_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace bench
}  // namespace kolo
