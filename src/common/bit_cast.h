// std::bit_cast for C++17: the bits of a value read as another type of the
// same size (memcpy is how C++17 says it without undefined behaviour; the
// compiler turns it into a register move).
#ifndef KOLO_COMMON_BIT_CAST_H_
#define KOLO_COMMON_BIT_CAST_H_

#include <cstring>
#include <type_traits>

namespace kolo {

template <typename To, typename From>
inline To BitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  static_assert(
      std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>,
      "BitCast needs trivially copyable types");
  To to;
  std::memcpy(&to, &from, sizeof(to));
  return to;
}

}  // namespace kolo

#endif  // KOLO_COMMON_BIT_CAST_H_
