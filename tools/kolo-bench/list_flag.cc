#include "list_flag.h"

namespace kolo::bench {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    const size_t begin = item.find_first_not_of(" \t");
    if (begin != std::string::npos) {
      items.push_back(
          item.substr(begin, item.find_last_not_of(" \t") - begin + 1));
    }
    start = comma + 1;
  }
  return items;
}

}  // namespace kolo::bench
