#include "storage/internal/byte_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::storage_internal {
namespace {

const char* ZlibCodeName(int r) {
  switch (r) {
    case Z_NEED_DICT:
      return "Z_NEED_DICT";
    case Z_STREAM_ERROR:
      return "Z_STREAM_ERROR";
    case Z_DATA_ERROR:
      return "Z_DATA_ERROR";
    case Z_MEM_ERROR:
      return "Z_MEM_ERROR";
    case Z_BUF_ERROR:
      return "Z_BUF_ERROR";
    default:
      return "zlib error";
  }
}

bool HasGzipMagic(absl::string_view b) {
  return b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x1f && static_cast<uint8_t>(b[1]) == 0x8b;
}

}  // namespace

ByteStream::ByteStream(absl::string_view bytes, std::string path)
    : in_(bytes), path_(std::move(path)), gzip_(HasGzipMagic(bytes)) {}

ByteStream::~ByteStream() {
  if (zinit_) inflateEnd(&zs_);
}

uint64_t ByteStream::MaxRemaining() const {
  const uint64_t left = in_.size() - pos_;
  return gzip_ ? left * 1032 + 64 : left;
}

absl::Status ByteStream::NextMember() {
  if (!zinit_) {
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) return absl::InternalError("inflateInit2 failed");
    zinit_ = true;
  } else {
    inflateReset(&zs_);
  }
  member_done_ = false;
  return absl::OkStatus();
}

absl::StatusOr<size_t> ByteStream::Read(char* dst, size_t n) {
  if (!gzip_) {
    const size_t k = std::min(n, in_.size() - pos_);
    std::memcpy(dst, in_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  size_t done = 0;
  while (done < n) {
    if (!zinit_ || member_done_) {
      if (pos_ == in_.size()) break;  // clean end after the last member
      // Concatenated gzip members form one stream; anything else after a member is garbage.
      if (member_done_ && !HasGzipMagic(in_.substr(pos_))) {
        return absl::DataLossError(absl::StrCat(path_, ": corrupt .gz: ", in_.size() - pos_,
                                                " trailing bytes after the gzip stream"));
      }
      if (absl::Status s = NextMember(); !s.ok()) return s;
    }
    // zlib counts in uInt; feed and drain at most 1 GiB per call.
    const size_t in_chunk = std::min<size_t>(in_.size() - pos_, 1u << 30);
    const size_t out_chunk = std::min<size_t>(n - done, 1u << 30);
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in_.data() + pos_));
    zs_.avail_in = static_cast<uInt>(in_chunk);
    zs_.next_out = reinterpret_cast<Bytef*>(dst + done);
    zs_.avail_out = static_cast<uInt>(out_chunk);
    const int r = inflate(&zs_, Z_NO_FLUSH);
    pos_ += in_chunk - zs_.avail_in;
    done += out_chunk - zs_.avail_out;
    if (r == Z_STREAM_END) {
      member_done_ = true;
    } else if (r == Z_BUF_ERROR || (r == Z_OK && zs_.avail_out != 0 && pos_ == in_.size())) {
      if (pos_ == in_.size()) {
        return absl::DataLossError(absl::StrCat(
            path_, ": truncated .gz: the gzip stream ends early after ", in_.size(), " bytes"));
      }
    } else if (r != Z_OK) {
      return absl::DataLossError(
          absl::StrCat(path_, ": corrupt .gz: corrupt deflate stream at compressed byte ", pos_,
                       ": ", zs_.msg != nullptr ? zs_.msg : "inflate error", " (zlib ",
                       ZlibCodeName(r), " ", r, "); expected a valid gzip stream"));
    }
  }
  return done;
}

absl::StatusOr<bool> ByteStream::AtEnd() {
  if (!gzip_) return pos_ == in_.size();
  // Inflate everything that is left: a corrupt deflate stream often decodes to extra bytes
  // before zlib notices (a bad distance, the trailer's CRC), and that corruption, not "more
  // bytes than expected", is what the caller must report.
  char scratch[1 << 14];
  bool extra = false;
  while (true) {
    ASSIGN_OR_RETURN(size_t n, Read(scratch, sizeof(scratch)));
    if (n == 0) break;
    extra = true;
  }
  return !extra;
}

}  // namespace sluice::storage_internal
