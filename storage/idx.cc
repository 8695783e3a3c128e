#include "storage/idx.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/internal/byte_stream.h"
#include "storage/internal/input_buffer.h"

namespace sluice {
namespace {

using storage_internal::ByteStream;
using storage_internal::ReadWholeInputFile;
using storage_internal::ResizeForInput;

struct IdxHeader {
  uint8_t type = 0;
  std::vector<uint32_t> dims;
};

size_t IdxTypeSize(uint8_t type) { return type == kIdxTypeU8 ? 1 : 4; }

// Reads one IDX file from `in`: validates magic and dimensions, then reads the values (still
// big-endian) straight into *values, sized exactly.
absl::StatusOr<IdxHeader> ReadIdx(ByteStream& in, const std::string& path, absl::string_view role,
                                  std::initializer_list<uint8_t> types,
                                  std::initializer_list<uint8_t> ndims, uint32_t expected_magic,
                                  std::string* values) {
  auto wrong_magic = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s; expected IDX %s magic 0x%08x (0x08 u8%s)", path, what, role, expected_magic,
        role == "images" ? ", 0x0D f32 also accepted" : ", 0x0C i32 also accepted"));
  };
  char head[4 + 4 * 255];
  ASSIGN_OR_RETURN(size_t got_magic, in.Read(head, 4));
  if (got_magic < 4) {
    return wrong_magic(absl::StrCat("file is ", got_magic, " bytes, too short for a magic"));
  }
  const uint32_t magic = DecodeBigEndian32(head);
  IdxHeader h;
  h.type = static_cast<uint8_t>(head[2]);
  const uint8_t nd = static_cast<uint8_t>(head[3]);
  if (absl::string_view(head, 4) == absl::string_view("\x93NUM", 4)) {
    return absl::DataLossError(
        absl::StrCat(path, ": this is a NumPy .npy file, not IDX ", role,
                     "; sluice-shard create reads .npy when --images and --labels are both .npy"));
  }
  if (head[0] != 0 || head[1] != 0 ||
      std::find(types.begin(), types.end(), h.type) == types.end()) {
    return wrong_magic(absl::StrFormat("magic is 0x%08x", magic));
  }
  if (std::find(ndims.begin(), ndims.end(), nd) == ndims.end()) {
    return absl::DataLossError(absl::StrFormat(
        "%s: magic is 0x%08x, IDX %s with %d dimension%s (byte 3); expected %s dimensions", path,
        magic, role, nd, nd == 1 ? "" : "s",
        role == "images" ? "3 (N, H, W) or 4 (N, H, W, C)" : "1 (N)"));
  }
  ASSIGN_OR_RETURN(size_t got_dims, in.Read(head + 4, 4 * size_t{nd}));
  if (got_dims < 4 * size_t{nd}) {
    return absl::DataLossError(absl::StrCat(path, ": truncated IDX header: ", 4 + got_dims,
                                            " bytes, expected ", 4 + 4 * nd));
  }
  uint64_t expected = IdxTypeSize(h.type);
  bool overflow = false;
  std::string dims;
  for (int i = 0; i < nd; ++i) {
    h.dims.push_back(DecodeBigEndian32(head + 4 + 4 * i));
    overflow |= __builtin_mul_overflow(expected, uint64_t{h.dims.back()}, &expected);
    absl::StrAppend(&dims, i == 0 ? "" : "x", h.dims.back());
    if (i > 0 && h.dims.back() == 0) {
      return absl::DataLossError(absl::StrCat(path, ": dimension ", i, " is 0, expected >= 1"));
    }
  }
  if (!overflow && !in.gzip() && expected > in.MaxRemaining()) {
    return absl::DataLossError(absl::StrCat(path, ": ", in.MaxRemaining(), " data bytes, expected ",
                                            expected, " for dimensions ", dims, " (truncated)"));
  }
  // Never allocate more than the input could possibly hold.
  if (overflow || expected > in.MaxRemaining()) {
    return absl::DataLossError(
        absl::StrCat(path, ": dimensions ", dims, " need ",
                     overflow ? std::string("more than 2^64") : absl::StrCat(expected),
                     " data bytes, more than the file holds (truncated?)"));
  }
  // The values are copied out of the file (inflated, for .gz), so they need memory of their
  // own: a header declaring 300000x100x100 asks for 3 GB.
  RETURN_IF_ERROR(CheckMemory(absl::StrCat(Printable(path), ": IDX ", role, " of dimensions ", dims,
                                           " (", expected, " bytes of values)"),
                              expected));
  RETURN_IF_ERROR(ResizeForInput(values, expected, path, absl::StrCat("IDX ", role, " ", dims)));
  ASSIGN_OR_RETURN(size_t got, in.Read(values->data(), expected));
  if (got < expected) {
    return absl::DataLossError(absl::StrCat(path, ": ", got, " data bytes, expected ", expected,
                                            " for dimensions ", dims, " (truncated)"));
  }
  ASSIGN_OR_RETURN(bool at_end, in.AtEnd());
  if (!at_end) {
    return absl::DataLossError(absl::StrCat(path, ": more than the ", expected,
                                            " data bytes expected for dimensions ", dims,
                                            " (trailing bytes)"));
  }
  return h;
}

// IDX values are big-endian; shards hold little-endian.
// `in` and `out` may be the same buffer.
void SwapWords(absl::string_view in, char* out) {
  for (size_t i = 0; i + 4 <= in.size(); i += 4) {
    const char a = in[i], b = in[i + 1], c = in[i + 2], d = in[i + 3];
    out[i] = d;
    out[i + 1] = c;
    out[i + 2] = b;
    out[i + 3] = a;
  }
}

}  // namespace

absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes, const std::string& path) {
  ByteStream in(bytes, path);
  if (!in.gzip()) return std::string(bytes);
  std::string out;
  size_t size = 0;
  while (true) {
    RETURN_IF_ERROR(ResizeForInput(&out, std::max<size_t>(out.size() * 2, 1 << 16), path,
                                   "its decompressed bytes"));
    ASSIGN_OR_RETURN(size_t n, in.Read(out.data() + size, out.size() - size));
    size += n;
    if (size < out.size()) break;
  }
  out.resize(size);
  return out;
}

absl::StatusOr<RecordArrays> ParseIdxPair(absl::string_view images, const std::string& images_path,
                                          absl::string_view labels,
                                          const std::string& labels_path) {
  RecordArrays r;
  ByteStream img_in(images, images_path);
  ASSIGN_OR_RETURN(IdxHeader img, ReadIdx(img_in, images_path, "images", {kIdxTypeU8, kIdxTypeF32},
                                          {3, 4}, 0x803, &r.samples));
  ByteStream lab_in(labels, labels_path);
  ASSIGN_OR_RETURN(IdxHeader lab, ReadIdx(lab_in, labels_path, "labels", {kIdxTypeU8, kIdxTypeI32},
                                          {1}, 0x801, &r.labels));
  if (img.dims[0] != lab.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, ": ", lab.dims[0],
                                                   " labels, expected ", img.dims[0],
                                                   " to match the images of ", images_path));
  }
  if (img.dims[0] == 0) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": 0 images, expected at least 1"));
  }
  r.count = img.dims[0];
  r.spec.sample_dtype = img.type == kIdxTypeU8 ? SampleDType::kU8 : SampleDType::kF32;
  r.spec.label_dtype = lab.type == kIdxTypeU8 ? LabelDType::kU8 : LabelDType::kI32;
  r.spec.height = img.dims[1];
  r.spec.width = img.dims[2];
  r.spec.channels = img.dims.size() == 4 ? img.dims[3] : 1;
  if (img.type != kIdxTypeU8) SwapWords(r.samples, r.samples.data());
  if (lab.type != kIdxTypeU8) SwapWords(r.labels, r.labels.data());
  return r;
}

absl::StatusOr<IdxInput> ReadIdxPair(Env* env, const std::string& images_path,
                                     const std::string& labels_path) {
  ASSIGN_OR_RETURN(std::string images, ReadWholeInputFile(env, images_path));
  ASSIGN_OR_RETURN(std::string labels, ReadWholeInputFile(env, labels_path));
  IdxInput in;
  in.sources.push_back({"images", BaseName(images_path), images.size(), Xxh3(images)});
  in.sources.push_back({"labels", BaseName(labels_path), labels.size(), Xxh3(labels)});
  ASSIGN_OR_RETURN(in.records, ParseIdxPair(images, images_path, labels, labels_path));
  return in;
}

std::string EncodeIdxImages(const RecordArrays& r) {
  const bool u8 = r.spec.sample_dtype == SampleDType::kU8;
  const uint8_t nd = r.spec.channels == 1 ? 3 : 4;
  std::string out(4 + 4 * nd, '\0');
  out[2] = static_cast<char>(u8 ? kIdxTypeU8 : kIdxTypeF32);
  out[3] = static_cast<char>(nd);
  EncodeBigEndian32(out.data() + 4, static_cast<uint32_t>(r.count));
  EncodeBigEndian32(out.data() + 8, r.spec.height);
  EncodeBigEndian32(out.data() + 12, r.spec.width);
  if (nd == 4) EncodeBigEndian32(out.data() + 16, r.spec.channels);
  const size_t header = out.size();
  out.resize(header + r.samples.size());
  if (u8) {
    std::memcpy(out.data() + header, r.samples.data(), r.samples.size());
  } else {
    SwapWords(r.samples, out.data() + header);
  }
  return out;
}

std::string EncodeIdxLabels(const RecordArrays& r) {
  const bool u8 = r.spec.label_dtype == LabelDType::kU8;
  std::string out(8, '\0');
  out[2] = static_cast<char>(u8 ? kIdxTypeU8 : kIdxTypeI32);
  out[3] = 1;
  EncodeBigEndian32(out.data() + 4, static_cast<uint32_t>(r.count));
  out.resize(8 + r.labels.size());
  if (u8) {
    std::memcpy(out.data() + 8, r.labels.data(), r.labels.size());
  } else {
    SwapWords(r.labels, out.data() + 8);
  }
  return out;
}

IdxPaths IdxPathsFor(const std::string& prefix, const RecordSpec& spec) {
  const bool u8 = spec.sample_dtype == SampleDType::kU8;
  return {absl::StrCat(prefix, "-images-idx", spec.channels == 1 ? 3 : 4, u8 ? "-ubyte" : "-float"),
          absl::StrCat(prefix, "-labels-idx1",
                       spec.label_dtype == LabelDType::kU8 ? "-ubyte" : "-int")};
}

absl::StatusOr<IdxPaths> WriteIdxPair(Env* env, const std::string& prefix,
                                      const RecordArrays& records) {
  if (records.count > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(records.count, " records do not fit an IDX dimension (u32)"));
  }
  IdxPaths paths = IdxPathsFor(prefix, records.spec);
  const std::string dir = DirName(prefix);
  RETURN_IF_ERROR(env->CreateDirs(dir));
  RETURN_IF_ERROR(WriteFileAtomically(env, paths.images, EncodeIdxImages(records)));
  RETURN_IF_ERROR(WriteFileAtomically(env, paths.labels, EncodeIdxLabels(records)));
  return paths;
}

}  // namespace sluice
