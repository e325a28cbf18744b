#include "common/hex.h"

namespace kolo {
namespace {

constexpr char kDigits[] = "0123456789abcdef";

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(const void* bytes, size_t size) {
  const unsigned char* in = static_cast<const unsigned char*>(bytes);
  std::string text;
  text.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    text.push_back(kDigits[in[i] >> 4]);
    text.push_back(kDigits[in[i] & 0xf]);
  }
  return text;
}

bool HexDecode(const std::string& text, void* bytes, size_t size) {
  if (text.size() != 2 * size) return false;
  unsigned char* out = static_cast<unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) {
    const int high = DigitValue(text[2 * i]);
    const int low = DigitValue(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return true;
}

}  // namespace kolo
