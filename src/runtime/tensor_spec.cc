#include "runtime/tensor_spec.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

namespace kolo {
namespace {

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void PutString(std::string* out, const std::string& s) {
  Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

void PutVector(std::string* out, const std::vector<int64_t>& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (int64_t x : v) Put(out, x);
}

// Reads fields back in order; the first overrun makes ok() false.
class Cursor {
 public:
  Cursor(const std::string& data, size_t* offset)
      : data_(data), offset_(offset) {}
  template <typename T>
  T Get() {
    T value{};
    if (ok_ && data_.size() - *offset_ >= sizeof(T)) {
      std::memcpy(&value, data_.data() + *offset_, sizeof(T));
      *offset_ += sizeof(T);
    } else {
      ok_ = false;
    }
    return value;
  }
  std::string GetString() {
    const uint32_t n = Get<uint32_t>();
    if (!ok_ || data_.size() - *offset_ < n) {
      ok_ = false;
      return {};
    }
    std::string s = data_.substr(*offset_, n);
    *offset_ += n;
    return s;
  }
  std::vector<int64_t> GetVector() {
    const uint32_t n = Get<uint32_t>();
    std::vector<int64_t> v;
    for (uint32_t i = 0; ok_ && i < n; ++i) v.push_back(Get<int64_t>());
    return v;
  }
  bool ok() const { return ok_; }

 private:
  const std::string& data_;
  size_t* offset_;
  bool ok_ = true;
};

std::string Join(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i ? "," : "") + std::to_string(values[i]);
  }
  return text + "]";
}

// "ranks 0,2 have 10; rank 1 has 12" from (rank, value) pairs.
std::string GroupRanksByValue(
    const std::vector<std::pair<int32_t, std::string>>& values) {
  std::map<std::string, std::vector<int32_t>> ranks_by_value;
  std::vector<std::string> order;
  for (const auto& [rank, value] : values) {
    auto& ranks = ranks_by_value[value];
    if (ranks.empty()) order.push_back(value);
    ranks.push_back(rank);
  }
  std::string text;
  for (const std::string& value : order) {
    const auto& ranks = ranks_by_value[value];
    if (!text.empty()) text += "; ";
    text += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      text += (i ? "," : "") + std::to_string(ranks[i]);
    }
    text += (ranks.size() == 1 ? " has " : " have ") + value;
  }
  return text;
}

}  // namespace

bool TensorSpec::operator==(const TensorSpec& o) const {
  return name == o.name && collective == o.collective && type == o.type &&
         op == o.op && root == o.root && count == o.count &&
         splits == o.splits && expected == o.expected && group == o.group &&
         group_size == o.group_size;
}

TensorSpec MakeSpec(Collective collective, DataType type, int64_t count,
                    ReduceOp op, int32_t root) {
  TensorSpec spec;
  spec.collective = collective;
  spec.type = type;
  spec.count = count;
  spec.op = op;
  spec.root = root;
  return spec;
}

void SerializeSpec(const TensorSpec& spec, std::string* out) {
  PutString(out, spec.name);
  Put<int32_t>(out, static_cast<int32_t>(spec.collective));
  Put<int32_t>(out, static_cast<int32_t>(spec.type));
  Put<int32_t>(out, static_cast<int32_t>(spec.op));
  Put<int32_t>(out, spec.root);
  Put<int64_t>(out, spec.count);
  PutVector(out, spec.splits);
  PutVector(out, spec.expected);
  PutString(out, spec.group);
  Put<int32_t>(out, spec.group_size);
}

namespace {

// A field of an announcement that came off the wire and that no rank
// could have sent: an unknown enum value or a negative size, which would
// size buffers wrongly downstream. (Splits are checked where they are used:
// their meaning depends on the collective.) "" when every field is possible.
std::string WrongField(const TensorSpec& spec) {
  const int32_t collective = static_cast<int32_t>(spec.collective);
  if (collective < static_cast<int32_t>(Collective::kAllreduce) ||
      collective > static_cast<int32_t>(Collective::kBarrier))
    return "collective " + std::to_string(collective);
  if (DataTypeSize(spec.type) <= 0)
    return "data type " + std::to_string(static_cast<int32_t>(spec.type));
  const std::vector<ReduceOp>& ops = AllReduceOps();
  if (std::find(ops.begin(), ops.end(), spec.op) == ops.end())
    return "reduce op " + std::to_string(static_cast<int32_t>(spec.op));
  if (spec.count < 0) return "count " + std::to_string(spec.count);
  if (spec.group_size < 0)
    return "group size " + std::to_string(spec.group_size);
  return "";
}

}  // namespace

StatusOr<TensorSpec> ParseSpec(const std::string& data, size_t* offset) {
  Cursor c(data, offset);
  TensorSpec spec;
  spec.name = c.GetString();
  spec.collective = static_cast<Collective>(c.Get<int32_t>());
  spec.type = static_cast<DataType>(c.Get<int32_t>());
  spec.op = static_cast<ReduceOp>(c.Get<int32_t>());
  spec.root = c.Get<int32_t>();
  spec.count = c.Get<int64_t>();
  spec.splits = c.GetVector();
  spec.expected = c.GetVector();
  spec.group = c.GetString();
  spec.group_size = c.Get<int32_t>();
  if (!c.ok()) return Internal("malformed tensor announcement in negotiation");
  const std::string wrong = WrongField(spec);
  if (!wrong.empty()) {
    return Internal("malformed announcement of tensor '" + spec.name +
                    "' in negotiation: " + wrong);
  }
  return spec;
}

namespace {

// The ranks that announced the tensor, with their announcements.
using Announcements = std::vector<std::pair<int32_t, const TensorSpec*>>;

// Every field that all ranks must agree on, as text for the message.
Status CheckFieldsAgree(const Announcements& present,
                        const std::string& tensor) {
  const TensorSpec& first = *present.front().second;
  struct Field {
    const char* name;
    std::function<std::string(const TensorSpec&)> value;
  };
  const bool counts_vary = first.collective == Collective::kAllgather ||
                           first.collective == Collective::kAlltoall;
  const std::vector<Field> fields = {
      {"operation",
       [](const TensorSpec& s) {
         return std::string(CollectiveName(s.collective));
       }},
      {"data type",
       [](const TensorSpec& s) { return std::string(DataTypeName(s.type)); }},
      {"reduce op",
       [](const TensorSpec& s) { return std::string(ReduceOpName(s.op)); }},
      {"root", [](const TensorSpec& s) { return std::to_string(s.root); }},
      {"element count",
       [&](const TensorSpec& s) {
         return counts_vary ? std::string("-") : std::to_string(s.count);
       }},
      {"group",
       [](const TensorSpec& s) {
         return s.group.empty()
                    ? std::string("none")
                    : "'" + s.group + "' of " + std::to_string(s.group_size);
       }},
  };
  for (const Field& field : fields) {
    std::vector<std::pair<int32_t, std::string>> values;
    bool differ = false;
    for (const auto& [rank, spec] : present) {
      values.emplace_back(rank, field.value(*spec));
      differ = differ || values.back().second != values.front().second;
    }
    if (differ) {
      return Mismatch(tensor + ": ranks disagree on the " + field.name + ": " +
                      GroupRanksByValue(values));
    }
  }
  return Status::Ok();
}

// allgather: a rank that names every rank's count names what each sends.
Status CheckAllgatherCounts(const Announcements& present,
                            const std::string& tensor, int32_t world_size) {
  for (const auto& [rank, spec] : present) {
    if (spec->splits.empty()) continue;
    if (static_cast<int32_t>(spec->splits.size()) != world_size) {
      return InvalidArgument(
          tensor + " on rank " + std::to_string(rank) + ": expects " +
          std::to_string(spec->splits.size()) + " counts for " +
          std::to_string(world_size) + " ranks");
    }
    for (const auto& [other, other_spec] : present) {
      if (spec->splits[other] != other_spec->count) {
        return Mismatch(tensor + ": rank " + std::to_string(other) + " sends " +
                        std::to_string(other_spec->count) +
                        " elements but rank " + std::to_string(rank) +
                        " expects " + std::to_string(spec->splits[other]) +
                        " from it (counts " + Join(spec->splits) + ")");
      }
    }
  }
  return Status::Ok();
}

// alltoall: every rank sends a count to each rank, and a rank that names
// what it expects from each must expect what that rank sends it.
Status CheckAlltoallCounts(const Announcements& present,
                           const std::string& tensor, int32_t world_size) {
  for (const auto& [rank, spec] : present) {
    if (static_cast<int32_t>(spec->splits.size()) != world_size) {
      return InvalidArgument(tensor + " on rank " + std::to_string(rank) +
                             ": " + std::to_string(spec->splits.size()) +
                             " send counts for " + std::to_string(world_size) +
                             " ranks");
    }
  }
  for (const auto& [rank, spec] : present) {
    if (spec->expected.empty()) continue;
    if (static_cast<int32_t>(spec->expected.size()) != world_size) {
      return InvalidArgument(tensor + " on rank " + std::to_string(rank) +
                             ": " + std::to_string(spec->expected.size()) +
                             " receive counts for " +
                             std::to_string(world_size) + " ranks");
    }
    for (const auto& [from, from_spec] : present) {
      if (spec->expected[from] != from_spec->splits[rank]) {
        return Mismatch(tensor + ": rank " + std::to_string(from) + " sends " +
                        std::to_string(from_spec->splits[rank]) +
                        " elements to rank " + std::to_string(rank) +
                        ", which expects " +
                        std::to_string(spec->expected[from]) + " from it");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSpecsAgree(const std::vector<const TensorSpec*>& by_rank,
                       int32_t world_size) {
  Announcements present;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r] != nullptr)
      present.emplace_back(static_cast<int32_t>(r), by_rank[r]);
  }
  if (present.empty()) return Status::Ok();
  const TensorSpec& first = *present.front().second;
  const std::string tensor = "tensor '" + first.name + "'";
  KOLO_RETURN_IF_ERROR(CheckFieldsAgree(present, tensor));
  if (first.collective == Collective::kAllgather) {
    KOLO_RETURN_IF_ERROR(CheckAllgatherCounts(present, tensor, world_size));
  }
  if (first.collective == Collective::kAlltoall) {
    KOLO_RETURN_IF_ERROR(CheckAlltoallCounts(present, tensor, world_size));
  }
  if (first.collective == Collective::kReducescatter &&
      first.count % world_size != 0) {
    return InvalidArgument(tensor + ": reducescatter of " +
                           std::to_string(first.count) +
                           " elements does not split evenly over " +
                           std::to_string(world_size) + " ranks");
  }
  if (first.collective == Collective::kBroadcast &&
      (first.root < 0 || first.root >= world_size)) {
    return InvalidArgument(tensor + ": broadcast root " +
                           std::to_string(first.root) + " is not a rank of a " +
                           std::to_string(world_size) + "-rank world");
  }
  return Status::Ok();
}

}  // namespace kolo
