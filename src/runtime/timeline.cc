#include "runtime/timeline.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <utility>
#include <vector>

#include "common/logging.h"

// File layout. The file always ends with the three bytes "\n]\n", and the
// writer remembers the offset of that "\n" (the tail). One write formats a
// batch as ",\n{event}" per event, appends "\n]\n" and pwrite()s the lot at
// the tail, so it replaces the old closing bracket and brings its own. The new
// bytes are never fewer than the three they cover, so no stale bracket is left
// behind, and because Open() writes the process metadata first there is always
// an earlier event for the leading comma to follow.
//
// One limit of "valid at every moment": Linux checks for a fatal signal
// between the pages (folios) of one buffered write, so a SIGKILL that lands
// inside a write spanning a page boundary cuts it short at that boundary. No
// in-place layout avoids this: the closing bracket must at some point move to
// the next page, and only a write within one page is all-or-nothing. The
// exposure is the time the writer spends inside multi-page writes, which is
// negligible unless producers outrun the writer (measured on ext4: 0 torn
// files in 1000 kills at ~100k events/s; ~7% when producers never pause).
namespace kolo {
namespace {

// Cap on one pwrite, so a writer that fell far behind does not format its
// whole backlog into one buffer.
constexpr size_t kMaxWriteBytes = size_t{1} << 20;

// How long the writer lets events gather after the first one, and how many
// end the wait early.
constexpr std::chrono::milliseconds kGatherTime{20};
constexpr size_t kGatherEvents = 8192;
// Tensor rows are numbered from 1 in order of first use.
constexpr int32_t kCyclesRow = 0;

void AppendJsonString(const std::string& text, std::string* out) {
  out->push_back('"');
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          *out += escaped;
        } else {
          out->push_back(ch);  // UTF-8 passes through unchanged
        }
    }
  }
  out->push_back('"');
}

void AppendMetadata(const char* kind, int32_t pid, int32_t tid,
                    const std::string& label, std::string* out) {
  *out += ",\n{\"name\":\"";
  *out += kind;
  *out += "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
          ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
  AppendJsonString(label, out);
  *out += "}}";
}

// pwrite() may write less than asked (a signal, a full disk); loop until all
// of `data` is at `offset` or a real error occurs.
Status WriteAllAt(int fd, const std::string& data, off_t offset,
                  const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                               offset + static_cast<off_t>(done));
    const int err = errno;
    if (n < 0 && err == EINTR) continue;
    if (n <= 0) {
      return Internal("writing timeline " + path + ": " +
                      (n < 0 ? std::strerror(err) : "pwrite wrote nothing"));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

// Contract: Push() and Flush() may be called from any thread; Push costs a
// lock and a vector append. One writer thread ("kolo-timeline") owns the file
// offset and the row table, so formatting needs no lock. Destruction writes
// everything queued, then joins the writer. A write error is sticky: it is
// logged once and later events are dropped (counted as written, so Flush()
// never hangs on a broken disk).
class Timeline::Impl {
 public:
  enum class Kind { kBegin, kEnd, kMark };
  struct Event {
    Kind kind;
    std::string row;   // the tensor; empty for marks
    std::string name;  // the phase or the mark
    TimePoint when;
  };

  Impl(std::string path, int fd, off_t tail, TimePoint start, int32_t section)
      : path_(std::move(path)),
        fd_(fd),
        start_(start),
        section_(section),
        tail_(tail) {
    writer_ = std::thread([this] { WriterLoop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    queued_cv_.notify_one();
    writer_.join();
    ::close(fd_);
  }

  void Push(Event event) {
    bool was_empty;
    bool full;
    {
      std::lock_guard<std::mutex> lock(mu_);
      was_empty = queue_.empty();
      queue_.push_back(std::move(event));
      full = queue_.size() == kGatherEvents;
      ++queued_;
    }
    // The writer waits for a first event, then for a burst to gather; only
    // those two moments need to wake it.
    if (was_empty || full) queued_cv_.notify_one();
  }

  void Flush() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = queued_;
    flush_requested_ = true;
    queued_cv_.notify_one();
    written_cv_.wait(lock, [&] { return written_ >= target; });
  }

 private:
  void WriterLoop() {
    pthread_setname_np(pthread_self(), "kolo-timeline");
    std::vector<Event> batch;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is written
      // Let the rest of a burst (a training step's events) arrive, so the
      // writer wakes and writes once per burst, not once per event, and
      // takes no CPU from the ranks while they communicate.
      queued_cv_.wait_for(lock, kGatherTime, [&] {
        return stopping_ || flush_requested_ || queue_.size() >= kGatherEvents;
      });
      flush_requested_ = false;
      batch.swap(queue_);
      lock.unlock();
      if (!failed_) WriteBatch(batch);
      const size_t count = batch.size();
      batch.clear();  // keeps its capacity for the next swap
      lock.lock();
      written_ += count;
      written_cv_.notify_all();
    }
  }

  void WriteBatch(const std::vector<Event>& batch) {
    std::string out;
    for (const Event& event : batch) {
      AppendEvent(event, &out);
      if (out.size() >= kMaxWriteBytes && !Commit(&out)) return;
    }
    if (!out.empty()) Commit(&out);
  }

  // Lands `events` and a fresh closing bracket at the tail in one pwrite.
  bool Commit(std::string* events) {
    *events += "\n]\n";
    const Status status = WriteAllAt(fd_, *events, tail_, path_);
    if (!status.ok()) {
      KOLO_LOG(ERROR) << status.message() << "; dropping later timeline events";
      failed_ = true;
      return false;
    }
    tail_ += static_cast<off_t>(events->size() - 3);
    events->clear();
    return true;
  }

  void AppendEvent(const Event& event, std::string* out) {
    // Row() may emit the row's metadata, which must precede its first event.
    const int32_t tid =
        event.kind == Kind::kMark ? kCyclesRow : Row(event.row, out);
    const auto since_open =
        std::chrono::duration_cast<std::chrono::microseconds>(event.when -
                                                              start_);
    switch (event.kind) {
      case Kind::kBegin:
        *out += ",\n{\"name\":";
        AppendJsonString(event.name, out);
        *out += ",\"ph\":\"B\"";
        break;
      case Kind::kEnd: *out += ",\n{\"ph\":\"E\""; break;
      case Kind::kMark:
        *out += ",\n{\"name\":";
        AppendJsonString(event.name, out);
        *out += ",\"ph\":\"i\",\"s\":\"t\"";
        break;
    }
    *out += ",\"pid\":" + std::to_string(section_) +
            ",\"tid\":" + std::to_string(tid) + ",\"ts\":" +
            std::to_string(std::max<int64_t>(0, since_open.count())) + "}";
  }

  // The row of `tensor`; a new row's thread_name metadata goes to `out` first.
  int32_t Row(const std::string& tensor, std::string* out) {
    auto [it, inserted] =
        rows_.emplace(tensor, static_cast<int32_t>(rows_.size()) + 1);
    if (inserted)
      AppendMetadata("thread_name", section_, it->second, tensor, out);
    return it->second;
  }

  const std::string path_;
  const int fd_;
  const TimePoint start_;
  const int32_t section_;  // the Chrome-trace pid of this Open's events

  std::mutex mu_;
  std::condition_variable queued_cv_;   // the writer waits: events or stop
  std::condition_variable written_cv_;  // Flush() waits: written_ advanced
  bool flush_requested_ = false;        // guarded by mu_
  std::vector<Event> queue_;            // guarded by mu_
  uint64_t queued_ = 0;                 // guarded by mu_; events ever pushed
  uint64_t written_ = 0;   // guarded by mu_; events written or dropped
  bool stopping_ = false;  // guarded by mu_

  // Owned by the writer thread.
  off_t tail_;  // offset of the final "\n]\n"
  std::unordered_map<std::string, int32_t> rows_;  // tensor -> tid
  bool failed_ = false;

  std::thread writer_;  // last: starts once every member above exists
};

namespace {

// Every section of a process's timeline counts time from one origin, so
// that the sections of successive Inits line up in the viewer.
Timeline::TimePoint ProcessEpoch() {
  static const Timeline::TimePoint epoch = std::chrono::steady_clock::now();
  return epoch;
}

// The offset of the closing "\n]\n" of a timeline that Open wrote, or an
// error naming the file when it does not end that way.
StatusOr<off_t> FindTail(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    return Internal("reading timeline " + path + ": " + std::strerror(err));
  }
  char end[3] = {};
  if (info.st_size < 3 || ::pread(fd, end, 3, info.st_size - 3) != 3 ||
      std::string(end, 3) != "\n]\n") {
    return InvalidArgument(
        "timeline " + path +
        " does not end as kolo's timelines do (\"\\n]\\n\"); "
        "kolo appends a new section only to a file it wrote");
  }
  return static_cast<off_t>(info.st_size - 3);
}

}  // namespace

StatusOr<std::unique_ptr<Timeline>> Timeline::Open(const std::string& path,
                                                   int32_t rank,
                                                   int32_t section) {
  const TimePoint start = ProcessEpoch();
  const int flags = O_RDWR | O_CREAT | O_CLOEXEC | (section == 0 ? O_TRUNC : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int err = errno;
    return InvalidArgument("opening timeline " + path + ": " +
                           std::strerror(err));
  }
  // The process name and the "cycles" row come first, so the file parses
  // (and later writes have an event to put a comma after) from here on.
  // A later section replaces the closing bracket the way a write does.
  off_t offset = 0;
  std::string head = "[\n";
  if (section > 0) {
    StatusOr<off_t> tail = FindTail(fd, path);
    if (!tail.ok()) {
      ::close(fd);
      return tail.status();
    }
    offset = *tail;
    head = ",\n";
  }
  head +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" +
      std::to_string(section) + ",\"args\":{\"name\":\"kolo rank " +
      std::to_string(rank) +
      (section > 0 ? ", init " + std::to_string(section + 1) : std::string()) +
      "\"}}";
  AppendMetadata("thread_name", section, kCyclesRow, "cycles", &head);
  const off_t tail = offset + static_cast<off_t>(head.size());
  head += "\n]\n";
  const Status status = WriteAllAt(fd, head, offset, path);
  if (!status.ok()) {
    ::close(fd);
    return status;
  }
  return std::unique_ptr<Timeline>(
      new Timeline(std::make_unique<Impl>(path, fd, tail, start, section)));
}

Timeline::Timeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Timeline::~Timeline() = default;

void Timeline::Begin(const std::string& tensor, const std::string& phase,
                     TimePoint when) {
  impl_->Push({Impl::Kind::kBegin, tensor, phase, when});
}

void Timeline::End(const std::string& tensor, TimePoint when) {
  impl_->Push({Impl::Kind::kEnd, tensor, std::string(), when});
}

void Timeline::Mark(const std::string& what, TimePoint when) {
  impl_->Push({Impl::Kind::kMark, std::string(), what, when});
}

void Timeline::Flush() { impl_->Flush(); }

}  // namespace kolo
