#include "elastic/protocol.h"

#include "common/config.h"

namespace kolo::elastic {

std::string FormatMembers(const std::vector<int64_t>& workers) {
  std::string text;
  for (int64_t worker : workers) {
    if (!text.empty()) text += ",";
    text += std::to_string(worker);
  }
  return text;
}

StatusOr<std::vector<int64_t>> ParseMembers(const std::string& text) {
  std::vector<int64_t> workers;
  if (text.empty()) return workers;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string piece = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    KOLO_ASSIGN_OR_RETURN(
        int64_t worker, ParseInt(piece, 0, INT32_MAX,
                                 "worker id in round members '" + text + "'"));
    workers.push_back(worker);
    if (comma == std::string::npos) return workers;
    start = comma + 1;
  }
}

}  // namespace kolo::elastic
