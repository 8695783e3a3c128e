// Cheap structural checks of a JPEG or PNG file's bytes, without decoding pixels: what
// ingestion (`sluice-shard create --image-folder / --image-list`) checks of every file, and
// where it reads each image's declared size (docs/formats/shard.md, "Ingestion checks").
//
// - JPEG: starts FF D8 (SOI); marker segments before the first scan are walked by their
//   lengths (none may run past the end); a frame header (SOF0..SOF15 but DHT, JPG, DAC) gives
//   the size; after the first SOS the entropy-coded data is scanned for the EOI marker FF D9
//   (stuffed FF 00, restart markers and the markers between progressive scans are stepped
//   over). No EOI: a truncated file. Bytes after EOI are allowed (PIL reads such files).
// - PNG: the 8-byte signature, then chunks walked by their lengths: the first is IHDR of 13
//   bytes (the size), at least one IDAT comes before IEND, IEND is reached and no chunk runs
//   past the end. Chunk CRCs are not checked. Metadata chunks are bounded (decompression
//   bombs): see kMaxPngInflatedChunkBytes below; the compressed ones are inflated (into a
//   discarded 64 KiB buffer) only up to that bound.
// - JPEG: at most kMaxJpegScans scans (SOS markers).
// Not checked: the entropy-coded / zlib-compressed pixel data itself (a flipped byte inside
// the image data passes); DecodeImage finds that at training time.
//
// Errors: kInvalidArgument with the reason (the caller adds the file's name).
// Thread safety: stateless.
#ifndef SLUICE_STORAGE_IMAGE_STRUCTURE_H_
#define SLUICE_STORAGE_IMAGE_STRUCTURE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/shard_format.h"

namespace sluice {

struct ImageStructure {
  SampleEncoding encoding = SampleEncoding::kJpeg;  // kJpeg or kPng
  uint32_t width = 0;                               // as the header declares, >= 1
  uint32_t height = 0;
  bool progressive = false;  // a JPEG whose frame header is SOF2, SOF6, SOF10 or SOF14
};

// The most pixels (width x height) an image may declare at ingestion by default: PIL's
// Image.MAX_IMAGE_PIXELS (PIL 9.4: 1024 * 1024 * 1024 // 4 // 3), the bound torchvision's
// ImageFolder users live with (PIL warns past it and refuses past twice it). `sluice-shard create
// --max-image-pixels` changes it; 0 means no bound (PIL's MAX_IMAGE_PIXELS = None).
inline constexpr uint64_t kDefaultMaxImagePixels = 89478485;

// The most scans (SOS markers) a JPEG may hold: libjpeg-turbo's TJFLAG_LIMITSCANS bound, which
// DecodeImage passes to tjDecompress2. A progressive JPEG has about 10; a "scan bomb" repeats one
// scan thousands of times (each a pass over the whole image). The structure check counts SOS
// markers and refuses more.
inline constexpr int kMaxJpegScans = 500;

// PNG metadata chunks (tEXt, zTXt, iTXt, iCCP, eXIf, sPLT): libspng parses (and inflates) those
// before the image data, and PIL too. Bounds the structure check enforces:
// - one compressed chunk (zTXt, compressed iTXt, iCCP) inflates to at most 1 MiB (PIL's
//   PngImagePlugin.MAX_TEXT_CHUNK; PIL refuses more, "Decompressed Data Too Large");
// - all of them hold at most 8 MiB together (inflated sizes, plus 1 KiB per chunk);
// - at most 1000 of them (libspng's SPNG_MAX_CHUNK_COUNT).
inline constexpr uint64_t kMaxPngInflatedChunkBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxPngMetadataBytes = uint64_t{8} << 20;
inline constexpr int kMaxPngMetadataChunks = 1000;
// What DecodeImage gives libspng (spng_set_chunk_limits): the most one chunk may inflate to, and
// the most all metadata chunks may hold. Twice the bounds above (libspng's inflate buffer
// doubles), so any PNG the structure check passes decodes; a bomb stops after 4 MiB inflated.
inline constexpr uint64_t kPngDecoderChunkLimit = uint64_t{4} << 20;
inline constexpr uint64_t kPngDecoderCacheLimit = uint64_t{16} << 20;

// kInvalidArgument when `s` declares more than `max_pixels` pixels ("declares 60000x60000 =
// 3600000000 pixels, more than the bound of ..."); OK when max_pixels is 0 (no bound).
absl::Status CheckDeclaredPixels(const ImageStructure& s, uint64_t max_pixels);

// kInvalidArgument when a file of `bytes` bytes is over kMaxEncodedSampleBytes (2^28), the most
// one encoded sample may hold: ingestion checks it from the file's size, before reading it.
absl::Status CheckImageFileSize(uint64_t bytes);

// The whole-file structure check above.
absl::StatusOr<ImageStructure> CheckImageStructure(absl::string_view bytes);

// kInvalidArgument when `bytes` is a progressive JPEG of more than kMaxJpegScans scans; OK for
// anything else (other damage is left to the decoder). Cheap: a baseline JPEG is walked up to
// its frame header only, a progressive one to its EOI. DecodeImage calls it before decoding.
absl::Status CheckJpegScanCount(absl::string_view bytes);

// Only the declared size, from the header (JPEG: the segments up to the frame header; PNG:
// IHDR); what the writer records as a split's largest image. Errors as CheckImageStructure.
absl::StatusOr<ImageStructure> ReadImageHeader(absl::string_view bytes);

}  // namespace sluice

#endif  // SLUICE_STORAGE_IMAGE_STRUCTURE_H_
