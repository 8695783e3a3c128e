#include "storage/npy.h"

#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/internal/input_buffer.h"

namespace sluice {
namespace {

constexpr absl::string_view kNpyMagic("\x93NUMPY", 6);

// The header dict, a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }
// Only what numpy writes is accepted: string keys, and string, True/False or int-tuple values.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, const std::string& path) : s_(text), path_(path) {}

  struct Value {
    enum { kString, kBool, kTuple } type;
    std::string text;
    bool flag = false;
    std::vector<uint64_t> tuple;
  };

  absl::StatusOr<std::map<std::string, Value>> Dict() {
    std::map<std::string, Value> out;
    if (!Eat('{')) return Error("expected '{' opening the header dict");
    while (!Eat('}')) {
      ASSIGN_OR_RETURN(std::string key, String());
      // numpy writes exactly these three keys (and refuses any other when it reads).
      if (key != "descr" && key != "fortran_order" && key != "shape") {
        return Error(absl::StrCat("unknown key ", QuotedPrintable(key, 40),
                                  "; expected only 'descr', 'fortran_order' and 'shape'"));
      }
      if (!Eat(':')) return Error(absl::StrCat("expected ':' after key '", key, "'"));
      ASSIGN_OR_RETURN(Value v, ParseValue(key));
      if (!out.emplace(key, std::move(v)).second) {
        return Error(absl::StrCat("key '", key, "' appears twice"));
      }
      if (!Eat(',') && !Peek('}')) return Error("expected ',' or '}' after a value");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the header dict");
    return out;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(path_, ": .npy header at character ", pos_, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  absl::StatusOr<uint64_t> Integer() {
    SkipSpace();
    uint64_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && absl::ascii_isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v)) {
        return Error("shape dimension does not fit in 64 bits");
      }
      ++pos_;
    }
    if (pos_ == start) return Error("expected a non-negative integer in the shape tuple");
    // numpy 1.x on some platforms writes "3L"
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    return v;
  }
  // The value of `key`, one of the three keys numpy writes; an error names the key and what it
  // expects.
  absl::StatusOr<Value> ParseValue(absl::string_view key) {
    Value v;
    SkipSpace();
    if (Peek('\'') || Peek('"')) {
      v.type = Value::kString;
      ASSIGN_OR_RETURN(v.text, String());
      return v;
    }
    if (Eat('(')) {
      v.type = Value::kTuple;
      while (!Eat(')')) {
        if (v.tuple.size() >= 32) return Error("more than 32 dimensions");
        ASSIGN_OR_RETURN(uint64_t d, Integer());
        v.tuple.push_back(d);
        if (!Eat(',') && !Peek(')')) return Error("expected ',' or ')' in the shape tuple");
      }
      return v;
    }
    for (const auto& [word, flag] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        v.type = Value::kBool;
        v.flag = flag;
        return v;
      }
    }
    const bool list = Peek('[');
    if (key == "descr") {
      return Error(list ? "descr is a list (a structured dtype); expected a plain dtype"
                        : "descr: expected a quoted dtype such as '|u1'");
    }
    if (key == "shape") {
      return Error(list ? "shape is a list; expected a tuple such as (5, 4, 4)"
                        : "shape: expected a tuple such as (5, 4, 4)");
    }
    return Error("fortran_order: expected True or False");
  }

  absl::string_view s_;
  size_t pos_ = 0;
  const std::string& path_;
};

absl::Status Unsupported(const std::string& path, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": .npy header field '", field, "' ", what));
}

// Checks descr against the subset read (docs/formats/npy.md) and fills kind and item_bytes.
absl::Status SetDType(const std::string& path, NpyArray* a) {
  const std::string& d = a->descr;
  if (d.size() >= 2 && d[0] == '>' && d.substr(2) != "1") {
    return Unsupported(path, "descr",
                       absl::StrCat("is '", d, "', a big-endian dtype; expected little-endian ('<",
                                    d.substr(1), "'): save x.astype('<", d.substr(1), "')"));
  }
  if (d.size() >= 2 && d[1] == 'O') {
    return Unsupported(path, "descr",
                       absl::StrCat("is '", d,
                                    "', an object array; expected numbers (u1, f4, i4, "
                                    "i8): save an array of a numeric dtype"));
  }
  static const struct {
    const char* code;
    char kind;
    size_t bytes;
  } kTypes[] = {{"u1", 'u', 1}, {"f4", 'f', 4}, {"i4", 'i', 4}, {"i8", 'i', 8}};
  for (const auto& t : kTypes) {
    if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=') && d.substr(1) == t.code) {
      a->kind = t.kind;
      a->item_bytes = t.bytes;
      return absl::OkStatus();
    }
  }
  return Unsupported(path, "descr",
                     absl::StrCat("is '", d,
                                  "'; expected one of '|u1', '<f4' (images), '|u1', "
                                  "'<i4', '<i8' (labels)"));
}

}  // namespace

bool IsNpy(absl::string_view bytes) { return bytes.substr(0, kNpyMagic.size()) == kNpyMagic; }

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& path) {
  if (!IsNpy(bytes)) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a .npy file (expected the magic \\x93NUMPY)"));
  }
  if (bytes.size() < 10) {
    return absl::DataLossError(
        absl::StrCat(path, ": .npy file of ", bytes.size(), " bytes is shorter than its preamble"));
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]), minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return absl::DataLossError(absl::StrCat(path, ": .npy format version ", major, ".", minor,
                                            "; expected 1.0, 2.0 or 3.0"));
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": .npy header length truncated"));
  }
  const uint64_t header_len =
      major == 1 ? DecodeFixed16(bytes.data() + 8) : uint64_t{DecodeFixed32(bytes.data() + 8)};
  const uint64_t data_start = 8 + len_bytes + header_len;
  if (data_start > bytes.size()) {
    return absl::DataLossError(absl::StrCat(path, ": .npy header of ", header_len,
                                            " bytes runs past the end of the ", bytes.size(),
                                            "-byte file"));
  }
  HeaderParser parser(bytes.substr(8 + len_bytes, header_len), path);
  ASSIGN_OR_RETURN(auto dict, parser.Dict());
  NpyArray a;
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (dict.count(key) == 0) {
      return absl::DataLossError(absl::StrCat(path, ": .npy header has no '", key, "' key"));
    }
  }
  if (dict.size() != 3) {
    return absl::DataLossError(absl::StrCat(path, ": .npy header has ", dict.size(),
                                            " keys; expected descr, fortran_order, shape"));
  }
  const auto& descr = dict["descr"];
  const auto& fortran = dict["fortran_order"];
  const auto& shape = dict["shape"];
  if (descr.type != HeaderParser::Value::kString || fortran.type != HeaderParser::Value::kBool ||
      shape.type != HeaderParser::Value::kTuple) {
    return absl::DataLossError(absl::StrCat(
        path, ": .npy header: expected descr a string, fortran_order True/False, shape a tuple"));
  }
  a.descr = descr.text;
  if (fortran.flag) {
    return Unsupported(path, "fortran_order",
                       "is True; expected False (C order): save np.ascontiguousarray(x)");
  }
  RETURN_IF_ERROR(SetDType(path, &a));
  a.shape = shape.tuple;
  uint64_t expected = a.item_bytes;
  for (uint64_t d : a.shape) {
    if (__builtin_mul_overflow(expected, d, &expected)) expected = UINT64_MAX;
  }
  const uint64_t held = bytes.size() - data_start;
  if (held != expected) {
    return absl::DataLossError(absl::StrCat(
        path, ": .npy data is ", held, " bytes; expected ",
        expected == UINT64_MAX ? std::string("more than 2^64") : absl::StrCat(expected),
        " for shape ", ShapeString(a.shape), " of '", a.descr, "'",
        held < expected ? " (truncated)" : " (trailing bytes)"));
  }
  a.data = bytes.substr(data_start);
  return a;
}

namespace {

using storage_internal::ResizeForInput;

// Labels as u8 (from u1) or i32 (from i4, or i8 whose values fit).
absl::Status SetLabels(const NpyArray& a, const std::string& path, RecordArrays* r) {
  if (a.shape.size() != 1) {
    return Unsupported(path, "shape",
                       absl::StrCat("is ", ShapeString(a.shape), "; expected [N] labels"));
  }
  if (a.kind == 'f') {
    return Unsupported(path, "descr",
                       absl::StrCat("is '", a.descr,
                                    "'; labels must be '|u1', "
                                    "'<i4' or '<i8'"));
  }
  if (a.kind == 'u' || a.item_bytes == 4) {
    r->spec.label_dtype = a.kind == 'u' ? LabelDType::kU8 : LabelDType::kI32;
    RETURN_IF_ERROR(ResizeForInput(&r->labels, a.data.size(), path, "the labels"));
    std::memcpy(r->labels.data(), a.data.data(), a.data.size());
    return absl::OkStatus();
  }
  r->spec.label_dtype = LabelDType::kI32;
  RETURN_IF_ERROR(ResizeForInput(&r->labels, a.shape[0] * 4, path, "the labels as int32"));
  for (uint64_t i = 0; i < a.shape[0]; ++i) {
    const int64_t v = static_cast<int64_t>(DecodeFixed64(a.data.data() + 8 * i));
    if (v < INT32_MIN || v > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": label of record ", i, " is ", v, ", which does not fit in int32"));
    }
    EncodeFixed32(r->labels.data() + 4 * i, static_cast<uint32_t>(v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RecordArrays> ParseNpyPair(absl::string_view images, const std::string& images_path,
                                          absl::string_view labels, const std::string& labels_path,
                                          std::optional<ArrayLayout> layout) {
  ASSIGN_OR_RETURN(NpyArray img, ParseNpy(images, images_path));
  ASSIGN_OR_RETURN(NpyArray lab, ParseNpy(labels, labels_path));
  if (img.kind == 'i') {
    return Unsupported(images_path, "descr",
                       absl::StrCat("is '", img.descr, "'; images must be '|u1' or '<f4'"));
  }
  ASSIGN_OR_RETURN(ArraySamples s, SamplesOfArray(img.shape, layout, images_path,
                                                  "--layout NHWC or --layout NCHW"));
  RecordArrays r;
  r.count = s.count;
  r.spec.sample_dtype = img.kind == 'u' ? SampleDType::kU8 : SampleDType::kF32;
  r.spec.height = s.height;
  r.spec.width = s.width;
  r.spec.channels = s.channels;
  RETURN_IF_ERROR(SetLabels(lab, labels_path, &r));
  if (lab.shape[0] != r.count) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, ": ", lab.shape[0],
                                                   " labels, expected ", r.count,
                                                   " to match the images of ", images_path));
  }
  RETURN_IF_ERROR(ResizeForInput(&r.samples, img.data.size(), images_path, "the samples"));
  if (s.transpose_chw) {
    TransposeChwToHwc(img.data.data(), r.samples.data(), s.count, s.channels, s.height, s.width,
                      img.item_bytes);
  } else {
    std::memcpy(r.samples.data(), img.data.data(), img.data.size());
  }
  return r;
}

}  // namespace sluice
