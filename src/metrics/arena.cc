#include "metrics/arena.h"

#include "common/enum_names.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <utility>

namespace kolo {
namespace metrics {
namespace {

constexpr char kMagic[8] = {'K', 'O', 'L', 'O', 'M', 'E', 'T', '1'};
constexpr uint32_t kLayoutVersion = 1;

size_t DescriptorsOffset() { return (sizeof(ArenaHeader) + 63) / 64 * 64; }
size_t SlotsOffset() {
  return (DescriptorsOffset() + kDescriptorCapacity * sizeof(Descriptor) + 63) /
         64 * 64;
}

// How many slots a series of `type` with `bucket_count` bounds takes.
uint32_t SlotsFor(MetricType type, uint32_t bucket_count) {
  return type == MetricType::kHistogram ? bucket_count + 2 : 1;
}

bool ValidType(uint32_t type) {
  return type >= static_cast<uint32_t>(MetricType::kCounter) &&
         type <= static_cast<uint32_t>(MetricType::kHistogram);
}

// Copies `text` into a fixed field, always NUL-terminated.
template <size_t N>
void CopyField(char (&field)[N], const std::string& text) {
  size_t n = std::min(text.size(), N - 1);
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

// A field read from another process's file, which may lack its NUL.
template <size_t N>
std::string ReadField(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

const ArenaHeader* HeaderAt(const void* base) {
  return static_cast<const ArenaHeader*>(base);
}
const Descriptor* DescriptorsAt(const void* base) {
  return reinterpret_cast<const Descriptor*>(static_cast<const char*>(base) +
                                             DescriptorsOffset());
}
const std::atomic<uint64_t>* SlotsAt(const void* base) {
  return reinterpret_cast<const std::atomic<uint64_t>*>(
      static_cast<const char*>(base) + SlotsOffset());
}

// A descriptor read from another process's arena: its type known and its
// slots inside the arena. Sums are formed so that none can wrap.
Status CheckDescriptor(const Descriptor& d, uint32_t index,
                       const std::string& what) {
  const std::string series = "metrics: " + what + ": series " +
                             std::to_string(index) + " is malformed: ";
  if (!ValidType(d.type))
    return InvalidArgument(series + "type " + std::to_string(d.type));
  if (d.bucket_count > kMaxBuckets) {
    return InvalidArgument(series + "bucket_count " +
                           std::to_string(d.bucket_count) + " exceeds " +
                           std::to_string(kMaxBuckets));
  }
  const uint64_t needed =
      SlotsFor(static_cast<MetricType>(d.type), d.bucket_count);
  if (uint64_t{d.first_slot} + needed > kSlotCapacity) {
    return InvalidArgument(series + "first_slot " +
                           std::to_string(d.first_slot) + " + " +
                           std::to_string(needed) + " slots exceeds " +
                           std::to_string(kSlotCapacity));
  }
  return Status::Ok();
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  static constexpr EnumName<MetricType> kNames[] = {
      {"counter", MetricType::kCounter},
      {"gauge", MetricType::kGauge},
      {"histogram", MetricType::kHistogram}};
  return NameOf(kNames, type, "untyped");
}

size_t ArenaBytes() {
  return SlotsOffset() + kSlotCapacity * sizeof(std::atomic<uint64_t>);
}

Status ValidateMetricName(const std::string& name) {
  if (name.empty() || !IsNameStart(name[0]) ||
      !std::all_of(name.begin(), name.end(), IsNameChar)) {
    return InvalidArgument("metric name '" + name +
                           "' is not [a-zA-Z_][a-zA-Z0-9_]*");
  }
  if (name.size() >= sizeof(Descriptor::name)) {
    return InvalidArgument("metric name '" + name + "' is longer than " +
                           std::to_string(sizeof(Descriptor::name) - 1) +
                           " characters");
  }
  return Status::Ok();
}

Status ValidateLabelName(const std::string& metric, const std::string& label) {
  if (label.empty() || !IsNameStart(label[0]) ||
      !std::all_of(label.begin(), label.end(), IsNameChar) ||
      label.compare(0, 2, "__") == 0) {
    return InvalidArgument("metric " + metric + ": label name '" + label +
                           "' is not [a-zA-Z_][a-zA-Z0-9_]* (and not __*)");
  }
  // Every series carries these three; `le` is a histogram's bucket label.
  for (const char* reserved : {"job", "rank", "host", "le"}) {
    if (label == reserved) {
      return InvalidArgument("metric " + metric + ": label '" + label +
                             "' is reserved (kolo sets job, rank and host; "
                             "le is a histogram's bucket)");
    }
  }
  return Status::Ok();
}

namespace {

// `text` with \\ and newlines escaped, and with `quote`, double quotes too.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  return Escape(value, /*quote=*/true);
}

std::string EscapeHelp(const std::string& help) {
  return Escape(help, /*quote=*/false);
}

Arena::Arena(void* base, size_t size, std::string path)
    : base_(base), size_(size), path_(std::move(path)) {}

Arena::~Arena() {
  if (path_.empty()) {
    ::operator delete(base_, std::align_val_t(64));
  } else {
    munmap(base_, size_);
  }
}

void Arena::Initialize(const std::string& job, const std::string& host,
                       int32_t rank) {
  std::memset(base_, 0, size_);
  auto* header = new (base_) ArenaHeader();
  std::memcpy(header->magic, kMagic, sizeof(kMagic));
  header->layout_version = kLayoutVersion;
  header->descriptor_capacity = kDescriptorCapacity;
  header->slot_capacity = kSlotCapacity;
  header->rank.store(rank, std::memory_order_relaxed);
  header->phase.store(static_cast<int32_t>(RankPhase::kStarting),
                      std::memory_order_relaxed);
  header->pid = static_cast<int32_t>(getpid());
  header->start_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  CopyField(header->job, job);
  CopyField(header->host, host);
  auto* slots = reinterpret_cast<std::atomic<uint64_t>*>(
      static_cast<char*>(base_) + SlotsOffset());
  for (uint32_t i = 0; i < kSlotCapacity; ++i)
    new (&slots[i]) std::atomic<uint64_t>(0);
  header->published.store(0, std::memory_order_release);
}

std::unique_ptr<Arena> Arena::CreateInMemory(const std::string& job,
                                             const std::string& host,
                                             int32_t rank) {
  void* base = ::operator new(ArenaBytes(), std::align_val_t(64));
  std::unique_ptr<Arena> arena(new Arena(base, ArenaBytes(), ""));
  arena->Initialize(job, host, rank);
  return arena;
}

StatusOr<std::unique_ptr<Arena>> Arena::CreateFile(const std::string& path,
                                                   const std::string& job,
                                                   const std::string& host,
                                                   int32_t rank) {
  // Built under a name readers skip and renamed when complete, so that a
  // reader never finds a half-made arena.
  std::string building = path + ".tmp";
  int fd = open(building.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Internal("metrics: cannot create " + building + ": " +
                    std::strerror(errno));
  }
  size_t size = ArenaBytes();
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status error =
        Internal("metrics: cannot size " + path + ": " + std::strerror(errno));
    close(fd);
    unlink(building.c_str());
    return error;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    unlink(building.c_str());
    return Internal("metrics: cannot map " + building + ": " +
                    std::strerror(map_errno));
  }
  std::unique_ptr<Arena> arena(new Arena(base, size, path));
  arena->Initialize(job, host, rank);
  if (rename(building.c_str(), path.c_str()) != 0) {
    int rename_errno = errno;
    unlink(building.c_str());
    return Internal("metrics: cannot rename " + building + " to " + path +
                    ": " + std::strerror(rename_errno));
  }
  return arena;
}

StatusOr<std::atomic<uint64_t>*> Arena::Register(
    MetricType type, const std::string& name, const std::string& help,
    const std::string& labels, const std::vector<double>& bounds) {
  KOLO_RETURN_IF_ERROR(ValidateMetricName(name));
  if (labels.size() >= sizeof(Descriptor::labels)) {
    return InvalidArgument("metric " + name + ": labels longer than " +
                           std::to_string(sizeof(Descriptor::labels) - 1) +
                           " characters");
  }
  if (type == MetricType::kHistogram) {
    if (bounds.empty() || bounds.size() > static_cast<size_t>(kMaxBuckets)) {
      return InvalidArgument("histogram " + name + " needs 1 to " +
                             std::to_string(kMaxBuckets) + " bucket bounds");
    }
    for (size_t i = 1; i < bounds.size(); ++i) {
      if (!(bounds[i - 1] < bounds[i])) {
        return InvalidArgument("histogram " + name +
                               ": bucket bounds must increase");
      }
    }
  }
  auto* header = static_cast<ArenaHeader*>(base_);
  auto* descriptors = reinterpret_cast<Descriptor*>(static_cast<char*>(base_) +
                                                    DescriptorsOffset());
  auto* slots = reinterpret_cast<std::atomic<uint64_t>*>(
      static_cast<char*>(base_) + SlotsOffset());
  MutexLock lock(&mutex_);
  uint32_t published = header->published.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < published; ++i) {
    const Descriptor& d = descriptors[i];
    if (name != d.name) continue;
    bool same_shape = d.type == static_cast<uint32_t>(type) &&
                      (type != MetricType::kHistogram ||
                       std::equal(bounds.begin(), bounds.end(), d.bounds,
                                  d.bounds + d.bucket_count));
    if (!same_shape) {
      return InvalidArgument("metric " + name + " is already a " +
                             MetricTypeName(static_cast<MetricType>(d.type)) +
                             " with other buckets or another type");
    }
    if (labels == d.labels) return &slots[d.first_slot];
  }
  uint32_t bucket_count =
      type == MetricType::kHistogram ? static_cast<uint32_t>(bounds.size()) : 0;
  uint32_t needed = SlotsFor(type, bucket_count);
  if (published == kDescriptorCapacity || next_slot_ + needed > kSlotCapacity) {
    return InvalidArgument("metric " + name +
                           ": this process's arena is full (" +
                           std::to_string(kDescriptorCapacity) + " series)");
  }
  Descriptor& d = descriptors[published];
  d.type = static_cast<uint32_t>(type);
  d.first_slot = next_slot_;
  d.bucket_count = bucket_count;
  CopyField(d.name, name);
  CopyField(d.help, help);
  CopyField(d.labels, labels);
  std::copy(bounds.begin(), bounds.end(), d.bounds);
  std::atomic<uint64_t>* first = &slots[next_slot_];
  for (uint32_t i = 0; i < needed; ++i) {
    first[i].store(0, std::memory_order_relaxed);
  }
  next_slot_ += needed;
  header->published.store(published + 1, std::memory_order_release);
  return first;
}

const double* Arena::BoundsOf(const std::atomic<uint64_t>* first_slot) const {
  const Descriptor* descriptors = DescriptorsAt(base_);
  uint32_t published =
      HeaderAt(base_)->published.load(std::memory_order_acquire);
  uint32_t slot = static_cast<uint32_t>(first_slot - SlotsAt(base_));
  for (uint32_t i = 0; i < published; ++i) {
    if (descriptors[i].first_slot == slot) return descriptors[i].bounds;
  }
  return nullptr;
}

void Arena::SetRank(int32_t rank) {
  static_cast<ArenaHeader*>(base_)->rank.store(rank, std::memory_order_relaxed);
}

void Arena::SetPhase(RankPhase phase) {
  static_cast<ArenaHeader*>(base_)->phase.store(static_cast<int32_t>(phase),
                                                std::memory_order_relaxed);
}

ArenaSnapshot Arena::Snapshot() const {
  StatusOr<ArenaSnapshot> snapshot = ReadArena(base_, size_, "own arena");
  return snapshot.ok() ? *std::move(snapshot) : ArenaSnapshot{};
}

StatusOr<ArenaSnapshot> ReadArena(const void* base, size_t size,
                                  const std::string& what) {
  if (size < ArenaBytes()) {
    return InvalidArgument("metrics: " + what + " has " + std::to_string(size) +
                           " bytes; an arena has " +
                           std::to_string(ArenaBytes()));
  }
  const ArenaHeader* header = HeaderAt(base);
  if (std::memcmp(header->magic, kMagic, sizeof(kMagic)) != 0 ||
      header->layout_version != kLayoutVersion ||
      header->descriptor_capacity != kDescriptorCapacity ||
      header->slot_capacity != kSlotCapacity) {
    return InvalidArgument("metrics: " + what +
                           " is not a kolo metric arena of this version");
  }
  uint32_t published = header->published.load(std::memory_order_acquire);
  if (published > kDescriptorCapacity) {
    return InvalidArgument("metrics: " + what + " claims " +
                           std::to_string(published) + " series");
  }
  ArenaSnapshot snapshot;
  snapshot.rank = header->rank.load(std::memory_order_relaxed);
  snapshot.phase =
      static_cast<RankPhase>(header->phase.load(std::memory_order_relaxed));
  snapshot.pid = header->pid;
  snapshot.start_unix_ms = header->start_unix_ms;
  snapshot.job = ReadField(header->job);
  snapshot.host = ReadField(header->host);
  const Descriptor* descriptors = DescriptorsAt(base);
  const std::atomic<uint64_t>* slots = SlotsAt(base);
  snapshot.series.reserve(published);
  for (uint32_t i = 0; i < published; ++i) {
    // Another process writes the arena: validate a private copy, so that
    // what was checked is what is read.
    Descriptor d;
    std::memcpy(&d, &descriptors[i], sizeof(d));
    KOLO_RETURN_IF_ERROR(CheckDescriptor(d, i, what));
    SeriesSnapshot series;
    series.type = static_cast<MetricType>(d.type);
    series.name = ReadField(d.name);
    series.help = ReadField(d.help);
    series.labels = ReadField(d.labels);
    const std::atomic<uint64_t>* values = &slots[d.first_slot];
    if (series.type == MetricType::kHistogram) {
      series.bounds.assign(d.bounds, d.bounds + d.bucket_count);
      for (uint32_t b = 0; b <= d.bucket_count; ++b) {
        series.bucket_counts.push_back(
            values[b].load(std::memory_order_relaxed));
      }
      series.value = BitsToDouble(
          values[d.bucket_count + 1].load(std::memory_order_relaxed));
    } else {
      series.value = BitsToDouble(values[0].load(std::memory_order_relaxed));
    }
    snapshot.series.push_back(std::move(series));
  }
  return snapshot;
}

StatusOr<ArenaSnapshot> ReadArenaFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return NotFound("metrics: cannot open " + path + ": " +
                    std::strerror(errno));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || info.st_size < 0) {
    close(fd);
    return Internal("metrics: cannot stat " + path);
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size < ArenaBytes()) {
    close(fd);
    // A rank between creating its file and sizing it.
    return InvalidArgument("metrics: " + path + " is not complete yet");
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return Internal("metrics: cannot map " + path + ": " +
                    std::strerror(errno));
  }
  StatusOr<ArenaSnapshot> snapshot = ReadArena(base, size, path);
  munmap(base, size);
  return snapshot;
}

}  // namespace metrics
}  // namespace kolo
