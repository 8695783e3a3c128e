#include "storage/image_structure.h"

#include <zlib.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

constexpr unsigned char kPngSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

uint8_t Byte(absl::string_view b, size_t at) { return static_cast<uint8_t>(b[at]); }
uint32_t Be16(absl::string_view b, size_t at) {
  return uint32_t{Byte(b, at)} << 8 | Byte(b, at + 1);
}
uint32_t Be32(absl::string_view b, size_t at) { return Be16(b, at) << 16 | Be16(b, at + 2); }

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

// A frame header (SOFn): C0..CF except C4 (DHT), C8 (JPG) and CC (DAC).
bool IsFrameHeader(uint8_t m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// From the first SOS at `pos` (its segment already skipped): the entropy-coded data up to the
// next marker that is not stuffing or a restart. Returns that marker's offset, or npos.
size_t SkipEntropyData(absl::string_view b, size_t pos) {
  while (pos < b.size()) {
    const void* ff = std::memchr(b.data() + pos, 0xFF, b.size() - pos);
    if (ff == nullptr) return absl::string_view::npos;
    pos = static_cast<size_t>(static_cast<const char*>(ff) - b.data());
    if (pos + 1 >= b.size()) return absl::string_view::npos;
    const uint8_t next = Byte(b, pos + 1);
    if (next == 0x00 || (next >= 0xD0 && next <= 0xD7) || next == 0xFF) {
      pos += next == 0xFF ? 1 : 2;  // stuffing, restart, or fill before a marker
      continue;
    }
    return pos;
  }
  return absl::string_view::npos;
}

absl::StatusOr<ImageStructure> WalkJpeg(absl::string_view b, bool header_only) {
  ImageStructure s;
  s.encoding = SampleEncoding::kJpeg;
  bool have_size = false;
  int scans = 0;
  size_t pos = 2;  // after SOI
  while (true) {
    if (pos >= b.size()) {
      return Bad(absl::StrCat("truncated JPEG: ends at byte ", b.size(),
                              " with no EOI marker (FF D9)",
                              have_size ? "" : " and no frame header"));
    }
    if (Byte(b, pos) != 0xFF) {
      return Bad(
          absl::StrFormat("corrupt JPEG: byte %u at offset %zu where a marker (FF xx) "
                          "was expected",
                          Byte(b, pos), pos));
    }
    if (pos + 1 >= b.size()) {
      return Bad(absl::StrCat("truncated JPEG: ends at byte ", b.size(), " inside a marker"));
    }
    const uint8_t marker = Byte(b, pos + 1);
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xD9) {
      if (!have_size) return Bad("corrupt JPEG: EOI (FF D9) before any frame header");
      return Bad("corrupt JPEG: EOI (FF D9) before any image data (no SOS)");
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      pos += 2;
      continue;
    }
    if (pos + 4 > b.size()) {
      return Bad(absl::StrFormat("truncated JPEG: marker FF %02X at offset %zu ends the file",
                                 marker, pos));
    }
    const uint32_t length = Be16(b, pos + 2);
    if (length < 2) {
      return Bad(absl::StrFormat("corrupt JPEG: segment FF %02X at offset %zu has length %u",
                                 marker, pos, length));
    }
    const size_t end = pos + 2 + length;
    if (end > b.size()) {
      return Bad(absl::StrFormat(
          "truncated JPEG: segment FF %02X at offset %zu (%u bytes) runs past the end of the "
          "file's %zu bytes",
          marker, pos, length, b.size()));
    }
    if (IsFrameHeader(marker) && !have_size) {
      if (length < 8) {
        return Bad(
            absl::StrFormat("corrupt JPEG: frame header at offset %zu of %u bytes", pos, length));
      }
      s.height = Be16(b, pos + 5);
      s.width = Be16(b, pos + 7);
      if (s.width == 0 || s.height == 0) {
        return Bad(absl::StrCat("corrupt JPEG: its frame header declares ", s.width, "x", s.height,
                                " pixels"));
      }
      have_size = true;
      s.progressive = (marker & 0x03) == 0x02;  // C2, C6, CA, CE
      if (header_only) return s;
    }
    pos = end;
    if (marker == 0xDA) {  // SOS: entropy-coded data follows, up to the next real marker
      if (!have_size) return Bad("corrupt JPEG: a scan (SOS) before any frame header");
      if (++scans > kMaxJpegScans) {
        return Bad(absl::StrCat("JPEG of more than ", kMaxJpegScans, " scans (scan ", scans,
                                " at offset ", pos - 2 - length,
                                "); refused (a progressive-JPEG scan bomb?: each scan is a "
                                "pass over the whole image)"));
      }
      const size_t next = SkipEntropyData(b, pos);
      if (next == absl::string_view::npos) {
        return Bad(absl::StrCat("truncated JPEG: no EOI marker (FF D9) after the image data (",
                                b.size(), " bytes; premature end of the file)"));
      }
      if (Byte(b, next + 1) == 0xD9) return s;  // EOI: complete (trailing bytes allowed)
      pos = next;  // DHT, SOS, ... between the scans of a progressive JPEG
    }
  }
}

// The bytes zlib stream `z` inflates to, into a discarded 64 KiB buffer; stops once past
// `limit` (so a bomb costs at most `limit` + 64 KiB of inflating). A damaged stream counts what
// it gave before the damage (the decoder refuses it).
uint64_t InflatedBytes(absl::string_view z, uint64_t limit) {
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) return 0;
  unsigned char out[1 << 16];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  zs.avail_in = static_cast<uInt>(z.size());
  int ret = Z_OK;
  while (ret == Z_OK && zs.total_out <= limit) {
    zs.next_out = out;
    zs.avail_out = sizeof(out);
    ret = inflate(&zs, Z_NO_FLUSH);
    if (ret == Z_BUF_ERROR && zs.avail_in == 0) break;  // the chunk ends inside the stream
    if (ret == Z_BUF_ERROR) ret = Z_OK;
  }
  const uint64_t total = zs.total_out;
  inflateEnd(&zs);
  return total;
}

// The memory libspng keeps for metadata chunk `type` of `data` (a bound on it: libspng's own
// accounting is a little less), or 0 for a chunk it does not keep. A compressed chunk inflating
// to more than kMaxPngInflatedChunkBytes is refused.
absl::StatusOr<uint64_t> MetadataBytes(const std::string& type, absl::string_view data,
                                       size_t pos) {
  constexpr uint64_t kPerChunk = 1024;  // libspng's per-chunk records and keyword copies
  if (type == "eXIf" || type == "tEXt") return data.size() + kPerChunk;
  if (type == "sPLT") return 3 * uint64_t{data.size()} + kPerChunk;  // the chunk and its entries
  if (type != "zTXt" && type != "iTXt" && type != "iCCP") return 0;
  // zTXt and iCCP: keyword NUL method stream; iTXt: keyword NUL flag method language NUL
  // translated-keyword NUL text (a stream when flag is 1).
  const size_t keyword_end = data.find('\0');
  if (keyword_end == absl::string_view::npos) return data.size() + kPerChunk;
  size_t stream = keyword_end + 2;
  if (type == "iTXt") {
    if (keyword_end + 1 >= data.size() || data[keyword_end + 1] != 1) {
      return data.size() + kPerChunk;  // stored uncompressed
    }
    const size_t language_end = data.find('\0', keyword_end + 3);
    const size_t translated_end = language_end == absl::string_view::npos
                                      ? absl::string_view::npos
                                      : data.find('\0', language_end + 1);
    if (translated_end == absl::string_view::npos) return data.size() + kPerChunk;
    stream = translated_end + 1;
  }
  if (stream >= data.size()) return data.size() + kPerChunk;
  const uint64_t inflated = InflatedBytes(data.substr(stream), kMaxPngInflatedChunkBytes);
  if (inflated > kMaxPngInflatedChunkBytes) {
    return Bad(absl::StrCat("PNG chunk '", type, "' at offset ", pos, " (", data.size(),
                            " bytes) inflates to more than ", kMaxPngInflatedChunkBytes,
                            " bytes, the bound on one compressed metadata chunk (PIL's "
                            "MAX_TEXT_CHUNK); refused (a decompression bomb?)"));
  }
  return inflated + kPerChunk;
}

absl::StatusOr<ImageStructure> WalkPng(absl::string_view b, bool header_only) {
  ImageStructure s;
  s.encoding = SampleEncoding::kPng;
  size_t pos = sizeof(kPngSignature);
  bool have_data = false;
  uint64_t metadata_bytes = 0;
  int metadata_chunks = 0;
  for (int chunk = 0;; ++chunk) {
    if (pos == b.size()) {
      return Bad(absl::StrCat("truncated PNG: ends at byte ", b.size(), " with no IEND chunk"));
    }
    if (pos + 8 > b.size()) {
      return Bad(absl::StrCat("truncated PNG: the chunk at offset ", pos,
                              " has no room for its length and type (", b.size(), " bytes)"));
    }
    const uint32_t length = Be32(b, pos);
    const std::string type(b.substr(pos + 4, 4));
    const std::string shown = absl::CHexEscape(type);
    if (length > 0x7FFFFFFFu) {
      return Bad(absl::StrCat("corrupt PNG: chunk '", shown, "' at offset ", pos,
                              " declares length ", length, " (at most 2^31 - 1)"));
    }
    if (pos + 12 + uint64_t{length} > b.size()) {
      return Bad(absl::StrCat("truncated PNG: chunk '", shown, "' at offset ", pos, " (", length,
                              " bytes of data) runs past the end of the file's ", b.size(),
                              " bytes"));
    }
    if (chunk == 0) {
      if (type != "IHDR" || length != 13) {
        return Bad(absl::StrCat("corrupt PNG: the first chunk is '", shown, "' of ", length,
                                " bytes; expected IHDR of 13"));
      }
      s.width = Be32(b, pos + 8);
      s.height = Be32(b, pos + 12);
      if (s.width == 0 || s.height == 0 || s.width > 0x7FFFFFFFu || s.height > 0x7FFFFFFFu) {
        return Bad(absl::StrCat("corrupt PNG: IHDR declares ", s.width, "x", s.height, " pixels"));
      }
      if (header_only) return s;
    } else if (type == "IDAT") {
      have_data = true;
    } else if (type == "IEND") {
      if (!have_data) return Bad("corrupt PNG: IEND before any IDAT chunk (no image data)");
      return s;  // bytes after IEND are allowed, as by PIL
    } else {
      absl::StatusOr<uint64_t> kept = MetadataBytes(type, b.substr(pos + 8, length), pos);
      if (!kept.ok()) return kept.status();
      if (*kept > 0) {
        metadata_bytes += *kept;
        if (++metadata_chunks > kMaxPngMetadataChunks) {
          return Bad(absl::StrCat("PNG of more than ", kMaxPngMetadataChunks,
                                  " metadata chunks (tEXt, zTXt, iTXt, iCCP, eXIf, sPLT): chunk '",
                                  shown, "' at offset ", pos, " is one more; refused"));
        }
        if (metadata_bytes > kMaxPngMetadataBytes) {
          return Bad(absl::StrCat(
              "PNG metadata chunks (tEXt, zTXt, iTXt, iCCP, eXIf, sPLT) hold more than ",
              kMaxPngMetadataBytes, " bytes (inflated), the bound on them all, with chunk '", shown,
              "' at offset ", pos, " (", length, " bytes); refused"));
        }
      }
    }
    pos += 12 + size_t{length};
  }
}

absl::StatusOr<ImageStructure> Walk(absl::string_view bytes, bool header_only) {
  if (bytes.empty()) return Bad("zero bytes, expected a JPEG or PNG image");
  if (bytes.size() >= 3 && Byte(bytes, 0) == 0xFF && Byte(bytes, 1) == 0xD8 &&
      Byte(bytes, 2) == 0xFF) {
    return WalkJpeg(bytes, header_only);
  }
  if (bytes.size() >= sizeof(kPngSignature) &&
      std::memcmp(bytes.data(), kPngSignature, sizeof(kPngSignature)) == 0) {
    return WalkPng(bytes, header_only);
  }
  std::string head;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    absl::StrAppendFormat(&head, " %02X", Byte(bytes, i));
  }
  return Bad(absl::StrCat("not a JPEG or PNG image (starts with", head,
                          "; expected FF D8 FF or 89 50 4E 47 0D 0A 1A 0A)"));
}

}  // namespace

absl::Status CheckDeclaredPixels(const ImageStructure& s, uint64_t max_pixels) {
  const uint64_t pixels = uint64_t{s.width} * s.height;
  if (max_pixels == 0 || pixels <= max_pixels) return absl::OkStatus();
  return Bad(absl::StrCat("declares ", s.width, "x", s.height, " = ", pixels,
                          " pixels (width x height), more than the bound of ", max_pixels,
                          " (--max-image-pixels; the default is PIL's Image.MAX_IMAGE_PIXELS, ",
                          kDefaultMaxImagePixels, ", and 0 means no bound)"));
}

absl::Status CheckImageFileSize(uint64_t bytes) {
  if (bytes <= kMaxEncodedSampleBytes) return absl::OkStatus();
  return Bad(
      absl::StrCat(bytes, " bytes, more than the ", kMaxEncodedSampleBytes,
                   "-byte (256 MiB) limit of one image file; refused from its size, unread"));
}

absl::StatusOr<ImageStructure> CheckImageStructure(absl::string_view bytes) {
  return Walk(bytes, /*header_only=*/false);
}

absl::Status CheckJpegScanCount(absl::string_view bytes) {
  if (bytes.size() < 3 || Byte(bytes, 0) != 0xFF || Byte(bytes, 1) != 0xD8 ||
      Byte(bytes, 2) != 0xFF) {
    return absl::OkStatus();
  }
  absl::StatusOr<ImageStructure> header = WalkJpeg(bytes, /*header_only=*/true);
  if (!header.ok() || !header->progressive) return absl::OkStatus();
  absl::StatusOr<ImageStructure> whole = WalkJpeg(bytes, /*header_only=*/false);
  if (!whole.ok() && absl::StartsWith(whole.status().message(), "JPEG of more than")) {
    return whole.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageStructure> ReadImageHeader(absl::string_view bytes) {
  return Walk(bytes, /*header_only=*/true);
}

}  // namespace sluice
