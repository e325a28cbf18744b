// An enum's names as one table read both ways: the name of a value (the
// first entry holding it) and the value of a name (any entry, so aliases
// follow a value's own name). The table replaces the switch and the chain
// of comparisons each named enum would otherwise write.
#ifndef KOLO_COMMON_ENUM_NAMES_H_
#define KOLO_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace kolo {

template <typename T>
struct EnumName {
  const char* name;
  T value;
};

// The name of `value`, or `unknown` for a value the table lacks.
template <typename T, size_t N>
const char* NameOf(const EnumName<T> (&names)[N], T value,
                   const char* unknown = "unknown") {
  for (const EnumName<T>& n : names) {
    if (n.value == value) return n.name;
  }
  return unknown;
}

// The value named `name`, compared exactly; nullopt for another name.
template <typename T, size_t N>
std::optional<T> ValueOf(const EnumName<T> (&names)[N], std::string_view name) {
  for (const EnumName<T>& n : names) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

}  // namespace kolo

#endif  // KOLO_COMMON_ENUM_NAMES_H_
