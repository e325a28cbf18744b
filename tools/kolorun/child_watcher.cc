#include "child_watcher.h"

#include <errno.h>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

// "\x1b[K" erases from the cursor to the end of the line.
constexpr const char* kEraseToEnd = "\x1b[K";
constexpr const char* kEraseLine = "\r\x1b[K";

void CloseIfOpen(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

ChildWatcher::ChildWatcher(SignalWatcher* signals, ExitHandler on_exit,
                           int stdout_fd, int stderr_fd)
    : signals_(signals),
      on_exit_(std::move(on_exit)),
      stdout_fd_(stdout_fd),
      stderr_fd_(stderr_fd) {}

ChildWatcher::~ChildWatcher() {
  for (Watched& child : children_) {
    CloseIfOpen(&child.stdin_fd);
    CloseIfOpen(&child.out.fd);
    CloseIfOpen(&child.err.fd);
  }
}

size_t ChildWatcher::Add(const Child& child, const RelayFormat& format) {
  Watched watched;
  watched.pid = child.pid;
  watched.stdin_fd = child.stdin_fd;
  watched.running = true;
  watched.out.fd = child.stdout_fd;
  watched.out.out_fd = stdout_fd_;
  watched.out.in_place = format.stdout_in_place;
  watched.out.splitter.emplace(format.format, format.stdout_prefix,
                               format.stdout_in_place);
  watched.err.fd = child.stderr_fd;
  watched.err.out_fd = stderr_fd_;
  watched.err.splitter.emplace(format.format, format.stderr_prefix);
  children_.push_back(std::move(watched));
  return children_.size() - 1;
}

ChildWatcher::Ready ChildWatcher::Poll(int timeout_ms, int extra_fd) {
  std::vector<pollfd> fds;
  std::vector<Stream*> polled;
  fds.push_back({signals_->fd(), POLLIN, 0});
  // A negative descriptor is polled as nothing.
  fds.push_back({extra_fd, POLLIN, 0});
  for (Watched& child : children_) {
    for (Stream* stream : {&child.out, &child.err}) {
      if (stream->fd < 0) continue;
      fds.push_back({stream->fd, POLLIN, 0});
      polled.push_back(stream);
    }
  }
  Ready ready;
  if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
    if (errno != EINTR) ready.error = std::strerror(errno);
    return ready;
  }
  // Output first, so that a child's last lines come before whatever its
  // owner says about its exit.
  for (size_t i = 2; i < fds.size(); ++i) {
    if (fds[i].revents != 0) Drain(polled[i - 2]);
  }
  ready.signals = fds[0].revents != 0;
  ready.extra = fds[1].revents != 0;
  return ready;
}

void ChildWatcher::ReapExited() {
  // By number: on_exit may Add() children, which moves the vector.
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!children_[i].running) continue;
    int wait_status = 0;
    pid_t pid;
    do {
      pid = waitpid(children_[i].pid, &wait_status, WNOHANG);
    } while (pid < 0 && errno == EINTR);
    if (pid == 0) continue;
    // Not our child any more (pid < 0): nothing left to wait for.
    if (pid < 0) wait_status = 0;
    Watched& child = children_[i];
    child.running = false;
    CloseStdin(&child);
    // Whatever it wrote is in the pipes already; relay it before its
    // epitaph.
    Drain(&child.out);
    Drain(&child.err);
    on_exit_(i, wait_status);
  }
}

void ChildWatcher::Signal(size_t child, int signal) const {
  SignalGroup(children_[child].pid, signal);
}

void ChildWatcher::SignalAll(int signal) const {
  for (const Watched& child : children_) {
    // An exited leader's group may live on in its children, which hold the
    // pipes open.
    if (child.running || child.out.fd >= 0 || child.err.fd >= 0) {
      SignalGroup(child.pid, signal);
    }
  }
}

void ChildWatcher::DrainAndCloseAll() {
  for (Watched& child : children_) {
    for (Stream* stream : {&child.out, &child.err}) {
      Drain(stream);
      CloseStream(stream);
    }
  }
}

void ChildWatcher::KillAndReapAll() {
  SignalAll(SIGKILL);
  for (Watched& child : children_) {
    if (child.running) {
      int wait_status = 0;
      while (waitpid(child.pid, &wait_status, 0) < 0 && errno == EINTR) {
      }
      child.running = false;
    }
    CloseStdin(&child);
    CloseStream(&child.out);
    CloseStream(&child.err);
  }
}

bool ChildWatcher::AnyRunning() const {
  return std::any_of(children_.begin(), children_.end(),
                     [](const Watched& child) { return child.running; });
}

bool ChildWatcher::AnyStreamOpen() const {
  return std::any_of(children_.begin(), children_.end(),
                     [](const Watched& child) {
                       return child.out.fd >= 0 || child.err.fd >= 0;
                     });
}

void ChildWatcher::Message(const std::string& text) const {
  WriteAbove(stderr_fd_, "kolorun: " + text + "\n");
}

void ChildWatcher::Drain(Stream* stream) {
  if (stream->fd < 0) return;
  // Enough for a full default pipe several times over, yet bounded, so that
  // one child printing without pause cannot starve the others or the
  // signals; what is left is read on the next turn of the loop.
  constexpr int kMaxReads = 4;
  char buffer[65536];
  for (int reads = 0; reads < kMaxReads; ++reads) {
    const ssize_t n = read(stream->fd, buffer, sizeof(buffer));
    if (n > 0) {
      const std::string lines =
          stream->splitter->Append(buffer, static_cast<size_t>(n));
      Relay(*stream, lines);
      if (on_lines_ && !lines.empty()) on_lines_(lines);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file, or an error that leaves nothing more to read: a
    // pseudo-terminal's master reads EIO once every holder of its other end
    // has closed it.
    CloseStream(stream);
    return;
  }
}

void ChildWatcher::CloseStream(Stream* stream) {
  if (stream->fd < 0) return;
  Relay(*stream, stream->splitter->Finish());
  CloseIfOpen(&stream->fd);
}

void ChildWatcher::CloseStdin(Watched* child) { CloseIfOpen(&child->stdin_fd); }

void ChildWatcher::Relay(const Stream& stream, const std::string& lines) {
  if (!stream.in_place) {
    if (!lines.empty()) WriteAbove(stream.out_fd, lines);
    return;
  }
  const std::string status = stream.splitter->Status();
  if (lines.empty() && status == status_) return;
  // One write: the finished lines replace the line shown, and the new one
  // is drawn below them; without lines, it is drawn over the old one.
  std::string bytes;
  if (!status_.empty()) bytes = lines.empty() ? "\r" : kEraseLine;
  bytes += lines;
  if (!status.empty()) {
    bytes += status + kEraseToEnd;
  } else if (lines.empty()) {
    bytes += kEraseToEnd;  // the line is gone without a trace
  }
  status_ = status;
  WriteAll(stream.out_fd, bytes);
}

void ChildWatcher::WriteAbove(int fd, const std::string& text) const {
  if (status_.empty()) {
    WriteAll(fd, text);
    return;
  }
  const std::string redraw = status_ + kEraseToEnd;
  if (fd == stdout_fd_) {
    WriteAll(fd, kEraseLine + text + redraw);
    return;
  }
  // Stderr is most likely the same terminal; the order of the writes keeps
  // the line in place below the text there too.
  WriteAll(stdout_fd_, kEraseLine);
  WriteAll(fd, text);
  WriteAll(stdout_fd_, redraw);
}

}  // namespace kolorun
}  // namespace kolo
