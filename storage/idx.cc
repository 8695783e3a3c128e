#include "storage/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

struct IdxArray {
  uint8_t type = 0;
  std::vector<uint32_t> dims;
  absl::string_view data;  // big-endian values, exactly product(dims) * size(type) bytes
};

size_t IdxTypeSize(uint8_t type) { return type == kIdxTypeU8 ? 1 : 4; }

absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, const std::string& path,
                                  absl::string_view role, std::initializer_list<uint8_t> types,
                                  std::initializer_list<uint8_t> ndims, uint32_t expected_magic) {
  auto wrong_magic = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %s; expected IDX %s magic 0x%08x (0x08 u8%s)", path, what, role, expected_magic,
        role == "images" ? ", 0x0D f32 also accepted" : ", 0x0C i32 also accepted"));
  };
  if (bytes.size() < 4) {
    return wrong_magic(absl::StrCat("file is ", bytes.size(), " bytes, too short for a magic"));
  }
  const uint32_t magic = DecodeBigEndian32(bytes.data());
  IdxArray a;
  a.type = static_cast<uint8_t>(bytes[2]);
  const uint8_t nd = static_cast<uint8_t>(bytes[3]);
  if (bytes[0] != 0 || bytes[1] != 0 ||
      std::find(types.begin(), types.end(), a.type) == types.end() ||
      std::find(ndims.begin(), ndims.end(), nd) == ndims.end()) {
    return wrong_magic(absl::StrFormat("magic is 0x%08x", magic));
  }
  const size_t header = 4 + 4 * size_t{nd};
  if (bytes.size() < header) {
    return absl::DataLossError(absl::StrCat(path, ": truncated IDX header: ", bytes.size(),
                                            " bytes, expected ", header));
  }
  uint64_t expected = IdxTypeSize(a.type);
  bool overflow = false;
  for (int i = 0; i < nd; ++i) {
    a.dims.push_back(DecodeBigEndian32(bytes.data() + 4 + 4 * i));
    overflow |= __builtin_mul_overflow(expected, uint64_t{a.dims.back()}, &expected);
  }
  for (size_t i = 1; i < a.dims.size(); ++i) {
    if (a.dims[i] == 0) {
      return absl::DataLossError(absl::StrCat(path, ": dimension ", i, " is 0, expected >= 1"));
    }
  }
  const size_t got = bytes.size() - header;
  if (overflow || expected != got) {
    std::string dims;
    for (uint32_t d : a.dims) absl::StrAppend(&dims, dims.empty() ? "" : "x", d);
    return absl::DataLossError(absl::StrCat(
        path, ": ", got, " data bytes, expected ",
        overflow ? std::string("more than 2^64") : absl::StrCat(expected),
        " for dimensions ", dims, overflow || got < expected ? " (truncated)" : " (trailing bytes)"));
  }
  a.data = bytes.substr(header);
  return a;
}

// IDX values are big-endian; shards hold little-endian.
void SwapWords(absl::string_view in, char* out) {
  for (size_t i = 0; i + 4 <= in.size(); i += 4) {
    out[i] = in[i + 3];
    out[i + 1] = in[i + 2];
    out[i + 2] = in[i + 1];
    out[i + 3] = in[i];
  }
}

}  // namespace

absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes, const std::string& path) {
  if (bytes.size() < 2 || static_cast<uint8_t>(bytes[0]) != 0x1f ||
      static_cast<uint8_t>(bytes[1]) != 0x8b) {
    return std::string(bytes);
  }
  std::string out;
  // The gzip trailer's ISIZE (size mod 2^32 of the last member) is a good first guess, but a
  // truncated or corrupt file has garbage there: never trust it beyond deflate's maximum
  // ratio (1032:1), so a bad 1 KB file cannot make us allocate a gigabyte.
  if (bytes.size() >= 18) {
    const uint64_t isize = DecodeFixed32(bytes.data() + bytes.size() - 4);
    out.reserve(std::min<uint64_t>({isize, uint64_t{bytes.size()} * 1032, uint64_t{1} << 30}));
  }
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return absl::InternalError("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  size_t consumed = 0;
  absl::Status status;
  while (true) {
    const size_t chunk = std::min<size_t>(bytes.size() - consumed, 1u << 30);
    zs.avail_in = static_cast<uInt>(chunk);
    if (out.size() == out.capacity()) out.reserve(std::max<size_t>(out.capacity() * 2, 1 << 16));
    const size_t before = out.size();
    out.resize(out.capacity());
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - before, 1u << 30));
    const uInt avail_out_before = zs.avail_out;
    const int r = inflate(&zs, Z_NO_FLUSH);
    out.resize(before + (avail_out_before - zs.avail_out));
    consumed += chunk - zs.avail_in;
    if (r == Z_STREAM_END) {
      if (consumed == bytes.size()) break;
      // Another gzip member follows (concatenated .gz files are one valid stream).
      if (bytes.size() - consumed < 2 || static_cast<uint8_t>(bytes[consumed]) != 0x1f ||
          static_cast<uint8_t>(bytes[consumed + 1]) != 0x8b) {
        status = absl::DataLossError(absl::StrCat(path, ": corrupt .gz: ", bytes.size() - consumed,
                                                  " trailing bytes after the gzip stream"));
        break;
      }
      inflateReset(&zs);
      continue;
    }
    if (r == Z_OK) continue;
    if (r == Z_BUF_ERROR && consumed == bytes.size()) {
      status = absl::DataLossError(
          absl::StrCat(path, ": truncated .gz: the gzip stream ends early after ",
                       bytes.size(), " bytes"));
    } else if (r == Z_BUF_ERROR) {
      continue;  // output was full; grow and go on
    } else {
      status = absl::DataLossError(absl::StrCat(path, ": corrupt .gz: ",
                                                zs.msg != nullptr ? zs.msg : "inflate error"));
    }
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<RecordArrays> ParseIdxPair(absl::string_view images, const std::string& images_path,
                                          absl::string_view labels,
                                          const std::string& labels_path) {
  ASSIGN_OR_RETURN(std::string img_bytes, MaybeGunzip(images, images_path));
  ASSIGN_OR_RETURN(std::string lab_bytes, MaybeGunzip(labels, labels_path));
  ASSIGN_OR_RETURN(IdxArray img, ParseIdx(img_bytes, images_path, "images",
                                          {kIdxTypeU8, kIdxTypeF32}, {3, 4}, 0x803));
  ASSIGN_OR_RETURN(IdxArray lab, ParseIdx(lab_bytes, labels_path, "labels",
                                          {kIdxTypeU8, kIdxTypeI32}, {1}, 0x801));
  if (img.dims[0] != lab.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, ": ", lab.dims[0],
                                                   " labels, expected ", img.dims[0],
                                                   " to match the images of ", images_path));
  }
  if (img.dims[0] == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": 0 images, expected at least 1"));
  }
  RecordArrays r;
  r.count = img.dims[0];
  r.spec.sample_dtype = img.type == kIdxTypeU8 ? SampleDType::kU8 : SampleDType::kF32;
  r.spec.label_dtype = lab.type == kIdxTypeU8 ? LabelDType::kU8 : LabelDType::kI32;
  r.spec.height = img.dims[1];
  r.spec.width = img.dims[2];
  r.spec.channels = img.dims.size() == 4 ? img.dims[3] : 1;
  if (img.type == kIdxTypeU8) {
    // Reuse the decompressed buffer: drop the header instead of copying 47 MB.
    const size_t header = img_bytes.size() - img.data.size();
    img_bytes.erase(0, header);
    r.samples = std::move(img_bytes);
  } else {
    r.samples.resize(img.data.size());
    SwapWords(img.data, r.samples.data());
  }
  if (lab.type == kIdxTypeU8) {
    r.labels = std::string(lab.data);
  } else {
    r.labels.resize(lab.data.size());
    SwapWords(lab.data, r.labels.data());
  }
  return r;
}

absl::StatusOr<IdxInput> ReadIdxPair(Env* env, const std::string& images_path,
                                     const std::string& labels_path) {
  ASSIGN_OR_RETURN(std::string images, ReadFileToString(env, images_path));
  ASSIGN_OR_RETURN(std::string labels, ReadFileToString(env, labels_path));
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
  return {absl::StrCat(prefix, "-images-idx", spec.channels == 1 ? 3 : 4,
                       u8 ? "-ubyte" : "-float"),
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
