#include "common/checksum.h"

#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace sluice {

uint64_t Xxh3(absl::string_view data) { return XXH3_64bits(data.data(), data.size()); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}
Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh3Stream::Update(absl::string_view data) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}
uint64_t Xxh3Stream::Digest() const {
  return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_));
}

std::string ChecksumToHex(uint64_t v) { return absl::StrFormat("%016x", v); }

}  // namespace sluice
