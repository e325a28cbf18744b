// Bytes as lower-case hexadecimal text and back: how random secrets and
// tokens travel through stores and environment variables.
#ifndef KOLO_COMMON_HEX_H_
#define KOLO_COMMON_HEX_H_

#include <cstddef>
#include <string>

namespace kolo {

// Two lower-case digits per byte.
std::string HexEncode(const void* bytes, size_t size);
// Fills `size` bytes from `text`; false, leaving them unspecified, unless
// `text` is exactly 2 * size lower-case hex digits.
bool HexDecode(const std::string& text, void* bytes, size_t size);

}  // namespace kolo

#endif  // KOLO_COMMON_HEX_H_
