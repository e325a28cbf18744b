#include "metrics/http_server.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace kolo {
namespace metrics {
namespace {

constexpr size_t kMaxRequestBytes = 16 * 1024;
constexpr std::chrono::milliseconds kRequestTimeout{1000};
constexpr std::chrono::milliseconds kSendTimeout{5000};

// Reads until the end of the request's head; false on timeout, a closed
// connection or an oversized head.
bool ReadRequestHead(int fd, std::string* head) {
  Deadline deadline = DeadlineAfter(kRequestTimeout);
  char buffer[4096];
  while (head->find("\r\n\r\n") == std::string::npos &&
         head->find("\n\n") == std::string::npos) {
    if (head->size() > kMaxRequestBytes) return false;
    pollfd ready{fd, POLLIN, 0};
    int n = poll(&ready, 1, PollTimeoutMs(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    // Never more than one byte past the bound: enough to know it is passed.
    const size_t room =
        std::min(sizeof(buffer), kMaxRequestBytes + 1 - head->size());
    ssize_t got = recv(fd, buffer, room, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    head->append(buffer, static_cast<size_t>(got));
  }
  return true;
}

}  // namespace

const char* HttpReason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    default: return "Internal Server Error";
  }
}

HttpServer::HttpServer(Socket listener, HttpHandler handler,
                       std::function<void()> tick,
                       std::chrono::milliseconds tick_period)
    : listener_(std::move(listener)),
      handler_(std::move(handler)),
      tick_(std::move(tick)),
      tick_period_(tick_period) {
  port_ = listener_.LocalPort();
}

HttpServer::~HttpServer() { Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, int port, HttpHandler handler,
    std::function<void()> tick, std::chrono::milliseconds tick_period) {
  StatusOr<Socket> listener = Socket::Listen(address, port);
  if (!listener.ok()) {
    return Internal("metrics: cannot listen on " + address + ":" +
                    std::to_string(port) + ": " + listener.status().message());
  }
  std::unique_ptr<HttpServer> server(new HttpServer(
      *std::move(listener), std::move(handler), std::move(tick), tick_period));
  server->thread_ = std::thread([raw = server.get()] { raw->Serve(); });
  return server;
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  thread_.join();
  listener_.Close();
}

void HttpServer::Serve() {
  pthread_setname_np(pthread_self(), "kolo-metrics");
  while (!stopping_.load()) {
    if (tick_) tick_();
    StatusOr<Socket> connection = listener_.Accept(DeadlineAfter(tick_period_));
    if (connection.ok()) Answer(*std::move(connection));
  }
}

void HttpServer::Answer(Socket connection) {
  std::string head;
  if (!ReadRequestHead(connection.fd(), &head)) return;
  std::string request_line = head.substr(0, head.find_first_of("\r\n"));
  size_t method_end = request_line.find(' ');
  size_t target_end = request_line.find(' ', method_end + 1);
  HttpResponse response;
  std::string method;
  if (method_end == std::string::npos || target_end == std::string::npos ||
      request_line.compare(target_end + 1, 5, "HTTP/") != 0) {
    response = {400, "text/plain; charset=utf-8", "malformed request line\n"};
  } else {
    method = request_line.substr(0, method_end);
    std::string target =
        request_line.substr(method_end + 1, target_end - method_end - 1);
    std::string path = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") {
      response = {405, "text/plain; charset=utf-8",
                  "only GET and HEAD are served\n"};
    } else {
      response = handler_(path);
    }
  }
  std::string reply =
      "HTTP/1.1 " + std::to_string(response.status) + " " +
      HttpReason(response.status) +
      "\r\nContent-Type: " + response.content_type +
      "\r\nContent-Length: " + std::to_string(response.body.size()) +
      "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
  if (method != "HEAD") reply += response.body;
  // A client gone mid-reply is its own loss; nothing to report.
  Status sent = connection.SendAll(reply.data(), reply.size(),
                                   DeadlineAfter(kSendTimeout));
  (void)sent;
  shutdown(connection.fd(), SHUT_WR);
}

}  // namespace metrics
}  // namespace kolo
