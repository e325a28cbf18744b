#include "collectives/descriptor.h"

#include <cstring>
#include <functional>
#include <map>

namespace kolo {
namespace {

// "ranks 0,2 have 10; rank 1 has 12" from one value per rank.
std::string GroupByValue(const std::vector<std::string>& value_by_rank) {
  std::map<std::string, std::vector<int>> ranks_by_value;
  std::vector<std::string> order;
  for (size_t r = 0; r < value_by_rank.size(); ++r) {
    auto& ranks = ranks_by_value[value_by_rank[r]];
    if (ranks.empty()) order.push_back(value_by_rank[r]);
    ranks.push_back(static_cast<int>(r));
  }
  std::string text;
  for (const std::string& value : order) {
    const auto& ranks = ranks_by_value[value];
    if (!text.empty()) text += "; ";
    text += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0) text += ",";
      text += std::to_string(ranks[i]);
    }
    text += (ranks.size() == 1 ? " has " : " have ") + value;
  }
  return text;
}

std::string CallName(const CallDescriptor& d) {
  return std::string(CollectiveName(static_cast<Collective>(d.collective))) +
         " #" + std::to_string(d.sequence);
}

std::string TypeName(int32_t type) {
  return type < 0 ? "none" : DataTypeName(static_cast<DataType>(type));
}

std::string OpName(int32_t op) {
  return op < 0 ? "none" : ReduceOpName(static_cast<ReduceOp>(op));
}

}  // namespace

const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kAllgatherv: return "allgatherv";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kAlltoallv: return "alltoallv";
    case Collective::kReducescatter: return "reducescatter";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown collective";
}

CallDescriptor MakeDescriptor(uint64_t sequence, Collective collective,
                              int64_t count, int32_t data_type,
                              int32_t reduce_op, int32_t root) {
  CallDescriptor d;
  d.sequence = sequence;
  d.collective = static_cast<int32_t>(collective);
  d.data_type = data_type;
  d.reduce_op = reduce_op;
  d.root = root;
  d.count = count;
  return d;
}

void MarkInvalid(CallDescriptor* descriptor, const std::string& problem) {
  descriptor->invalid = 1;
  std::strncpy(descriptor->problem, problem.c_str(), sizeof(descriptor->problem) - 1);
}

Status CompareDescriptors(const std::vector<CallDescriptor>& by_rank) {
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r].invalid) {
      return InvalidArgument(CallName(by_rank[r]) + " on rank " + std::to_string(r) +
                             ": " + by_rank[r].problem);
    }
  }
  // Fields in the order a reader wants them reported: a different
  // collective explains everything else that differs.
  struct Field {
    const char* name;
    std::function<std::string(const CallDescriptor&)> value;
  };
  const std::vector<Field> fields = {
      {"collective", [](const CallDescriptor& d) {
         return std::string(CollectiveName(static_cast<Collective>(d.collective)));
       }},
      {"sequence number",
       [](const CallDescriptor& d) { return std::to_string(d.sequence); }},
      {"data type", [](const CallDescriptor& d) { return TypeName(d.data_type); }},
      {"reduce op", [](const CallDescriptor& d) { return OpName(d.reduce_op); }},
      {"root", [](const CallDescriptor& d) { return std::to_string(d.root); }},
      {"element count", [](const CallDescriptor& d) {
         const auto c = static_cast<Collective>(d.collective);
         // Counts of the v-collectives legitimately differ per rank.
         if (c == Collective::kAllgatherv || c == Collective::kAlltoallv) return std::string("-");
         return std::to_string(d.count);
       }},
  };
  for (const Field& field : fields) {
    std::vector<std::string> values;
    for (const CallDescriptor& d : by_rank) values.push_back(field.value(d));
    for (const std::string& v : values) {
      if (v != values[0]) {
        return Mismatch(CallName(by_rank[0]) + ": ranks disagree on the " +
                        field.name + ": " + GroupByValue(values));
      }
    }
  }
  return Status::Ok();
}

Status CheckAllgathervCounts(const std::vector<std::vector<int64_t>>& recv_counts,
                             const std::vector<int64_t>& send_counts) {
  std::vector<std::string> lists;
  for (const auto& counts : recv_counts) {
    std::string text = "[";
    for (size_t i = 0; i < counts.size(); ++i) {
      text += (i ? "," : "") + std::to_string(counts[i]);
    }
    lists.push_back(text + "]");
  }
  for (const std::string& list : lists) {
    if (list != lists[0]) {
      return Mismatch("allgatherv: ranks disagree on recv_counts: " + GroupByValue(lists));
    }
  }
  for (size_t r = 0; r < send_counts.size(); ++r) {
    if (send_counts[r] != recv_counts[0][r]) {
      return Mismatch("allgatherv: rank " + std::to_string(r) + " sends " +
                      std::to_string(send_counts[r]) + " elements but recv_counts[" +
                      std::to_string(r) + "] is " + std::to_string(recv_counts[0][r]));
    }
  }
  return Status::Ok();
}

Status CheckAlltoallvCounts(const std::vector<std::vector<int64_t>>& send_counts,
                            const std::vector<std::vector<int64_t>>& recv_counts) {
  for (size_t i = 0; i < send_counts.size(); ++i) {
    for (size_t j = 0; j < recv_counts.size(); ++j) {
      if (send_counts[i][j] != recv_counts[j][i]) {
        return Mismatch("alltoallv: rank " + std::to_string(i) + " sends " +
                        std::to_string(send_counts[i][j]) + " elements to rank " +
                        std::to_string(j) + ", which expects " +
                        std::to_string(recv_counts[j][i]) + " from it");
      }
    }
  }
  return Status::Ok();
}

}  // namespace kolo
