// XXH3-64 checksums (libxxhash), the checksum of every sluice on-disk format.
#ifndef SLUICE_COMMON_CHECKSUM_H_
#define SLUICE_COMMON_CHECKSUM_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// XXH3 64-bit hash with seed 0 of `data`.
uint64_t Xxh3(absl::string_view data);

// Streaming XXH3-64 over several pieces; equals Xxh3() of their concatenation.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(absl::string_view data);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t*
};

// 16 lowercase hex digits.
std::string ChecksumToHex(uint64_t v);

}  // namespace sluice

#endif  // SLUICE_COMMON_CHECKSUM_H_
