#include "engine/checkpoint.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "engine/checkpoint_format.h"

namespace sluice {

namespace fmt = checkpoint_format;

const std::string* FindValue(const KeyValues& kv, absl::string_view key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::vector<std::string> IdentityDifferences(const KeyValues& saved, const KeyValues& now) {
  std::vector<std::string> out;
  for (const auto& [k, v] : saved) {
    const std::string* n = FindValue(now, k);
    if (n == nullptr || *n != v) {
      out.push_back(
          absl::StrCat(k, ": ", v, " in the checkpoint, ", n == nullptr ? "(absent)" : *n, " now"));
    }
  }
  for (const auto& [k, v] : now) {
    if (FindValue(saved, k) == nullptr) {
      out.push_back(absl::StrCat(k, ": (absent) in the checkpoint, ", v, " now"));
    }
  }
  return out;
}

absl::Status CheckFiniteState(const ModelState& state) {
  for (const auto* tensors : {&state.params, &state.opt_state}) {
    for (const HostTensor& t : *tensors) {
      for (size_t i = 0; i < t.values.size(); ++i) {
        if (!std::isfinite(t.values[i])) {
          return absl::OutOfRangeError(
              absl::StrCat(tensors == &state.params ? "parameter '" : "optimizer state '", t.name,
                           "' holds ", t.values[i], " at index ", i, " (training diverged)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

namespace {

void PutBytes(std::string* dst, absl::string_view bytes) {
  PutFixed32(dst, static_cast<uint32_t>(bytes.size()));
  dst->append(bytes.data(), bytes.size());
}

void PutKeyValues(std::string* dst, const KeyValues& kv) {
  PutFixed32(dst, static_cast<uint32_t>(kv.size()));
  for (const auto& [k, v] : kv) {
    PutBytes(dst, k);
    PutBytes(dst, v);
  }
}

void AppendSection(std::string* file, fmt::SectionType type, const std::string& payload) {
  const size_t start = file->size();
  PutFixed32(file, type);
  PutFixed32(file, 0);
  PutFixed64(file, payload.size());
  file->append(payload);
  PutFixed64(file, Xxh3(absl::string_view(*file).substr(start)));
}

absl::StatusOr<std::string> TensorPayload(const HostTensor& t, fmt::TensorKind kind) {
  int64_t count = 1;
  for (int64_t d : t.shape) count *= d;
  if (t.shape.empty() || count != static_cast<int64_t>(t.values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: tensor '", t.name, "' has ", t.values.size(),
                     " values for its shape of rank ", t.shape.size()));
  }
  std::string payload;
  payload.reserve(32 + t.name.size() + 8 * t.shape.size() + 4 * t.values.size());
  PutFixed32(&payload, kind);
  PutBytes(&payload, t.name);
  PutFixed32(&payload, static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) PutFixed64(&payload, static_cast<uint64_t>(d));
  const size_t at = payload.size();
  payload.resize(at + 4 * t.values.size());
  for (size_t i = 0; i < t.values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &t.values[i], 4);
    EncodeFixed32(payload.data() + at + 4 * i, bits);
  }
  return payload;
}

// Reads fields of one section's payload, turning any overrun into kDataLoss that names the
// file and section.
class PayloadReader {
 public:
  PayloadReader(absl::string_view payload, std::string where)
      : rest_(payload), where_(std::move(where)) {}

  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("corrupt checkpoint ", where_, ": ", what));
  }
  absl::StatusOr<uint32_t> Fixed32() {
    if (rest_.size() < 4) return Error("payload ends inside a 4-byte field");
    const uint32_t v = DecodeFixed32(rest_.data());
    rest_.remove_prefix(4);
    return v;
  }
  absl::StatusOr<uint64_t> Fixed64() {
    if (rest_.size() < 8) return Error("payload ends inside an 8-byte field");
    const uint64_t v = DecodeFixed64(rest_.data());
    rest_.remove_prefix(8);
    return v;
  }
  absl::StatusOr<absl::string_view> Bytes(uint64_t n) {
    if (rest_.size() < n)
      return Error(absl::StrCat("a field of ", n, " bytes overruns the payload"));
    absl::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }
  absl::StatusOr<std::string> LengthPrefixed() {
    ASSIGN_OR_RETURN(uint32_t n, Fixed32());
    ASSIGN_OR_RETURN(absl::string_view v, Bytes(n));
    return std::string(v);
  }
  absl::StatusOr<KeyValues> ReadKeyValues() {
    ASSIGN_OR_RETURN(uint32_t count, Fixed32());
    KeyValues kv;
    for (uint32_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(std::string key, LengthPrefixed());
      ASSIGN_OR_RETURN(std::string value, LengthPrefixed());
      kv.emplace_back(std::move(key), std::move(value));
    }
    return kv;
  }
  absl::Status ExpectEnd() const {
    if (!rest_.empty()) return Error(absl::StrCat(rest_.size(), " unexpected trailing bytes"));
    return absl::OkStatus();
  }

 private:
  absl::string_view rest_;
  std::string where_;
};

absl::StatusOr<HostTensor> ReadTensor(PayloadReader& r, fmt::TensorKind expected_kind,
                                      const std::vector<int64_t>& expected_shape) {
  ASSIGN_OR_RETURN(uint32_t kind, r.Fixed32());
  if (kind != expected_kind)
    return r.Error(absl::StrCat("tensor kind ", kind, ", expected ", expected_kind));
  HostTensor t;
  ASSIGN_OR_RETURN(t.name, r.LengthPrefixed());
  ASSIGN_OR_RETURN(uint32_t rank, r.Fixed32());
  if (rank != expected_shape.size()) {
    return r.Error(absl::StrCat("tensor '", t.name, "' has rank ", rank, ", the model needs ",
                                expected_shape.size()));
  }
  int64_t count = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    ASSIGN_OR_RETURN(uint64_t d, r.Fixed64());
    if (static_cast<int64_t>(d) != expected_shape[i]) {
      return r.Error(absl::StrCat("tensor '", t.name, "' dimension ", i, " is ", d,
                                  ", the model needs ", expected_shape[i]));
    }
    t.shape.push_back(static_cast<int64_t>(d));
    count *= static_cast<int64_t>(d);
  }
  ASSIGN_OR_RETURN(absl::string_view raw, r.Bytes(4 * static_cast<uint64_t>(count)));
  t.values.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t bits = DecodeFixed32(raw.data() + 4 * i);
    std::memcpy(&t.values[i], &bits, 4);
  }
  RETURN_IF_ERROR(r.ExpectEnd());
  return t;
}

constexpr auto kSectionNames = MakeEnumNames<uint32_t>({
    {fmt::kModel, "model"},
    {fmt::kPosition, "position"},
    {fmt::kTensor, "tensor"},
    {fmt::kPipeline, "pipeline"},
    {fmt::kRunConfig, "run config"},
    {fmt::kRunIdentity, "run identity"},
});
absl::string_view SectionName(uint32_t type) {
  const absl::string_view name = kSectionNames.Name(type);
  return name == "?" ? "unknown" : name;
}

}  // namespace

absl::StatusOr<std::string> EncodeCheckpoint(const Checkpoint& c) {
  const ModelState& s = c.state;
  std::string file(fmt::kMagic, sizeof(fmt::kMagic));
  PutFixed32(&file, fmt::kVersion);
  PutFixed32(&file,
             static_cast<uint32_t>(fmt::kFixedSections + s.params.size() + s.opt_state.size()));

  std::string model;
  PutFixed32(&model, static_cast<uint32_t>(s.model.layers.size()));
  for (int size : s.model.layers) PutFixed32(&model, static_cast<uint32_t>(size));
  AppendSection(&file, fmt::kModel, model);

  std::string position;
  PutFixed64(&position, static_cast<uint64_t>(s.optimizer_steps));
  PutFixed64(&position, c.epoch);
  PutFixed64(&position, c.step_in_epoch);
  PutFixed64(&position, c.seed);
  PutFixed64(&position, c.samples_in_epoch);
  PutFixed64(&position, c.samples_total);
  AppendSection(&file, fmt::kPosition, position);

  if (s.params.size() != 2 * static_cast<size_t>(s.model.num_linear()) ||
      s.opt_state.size() % s.params.size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint: ", s.params.size(), " parameter and ", s.opt_state.size(),
        " optimizer-state tensors do not fit a model of ", s.model.num_linear(), " layers"));
  }
  for (const HostTensor& t : s.params) {
    ASSIGN_OR_RETURN(std::string payload, TensorPayload(t, fmt::kParameter));
    AppendSection(&file, fmt::kTensor, payload);
  }
  for (const HostTensor& t : s.opt_state) {
    ASSIGN_OR_RETURN(std::string payload, TensorPayload(t, fmt::kOptimizerState));
    AppendSection(&file, fmt::kTensor, payload);
  }
  std::string pipeline, run, identity;
  PutKeyValues(&pipeline, c.pipeline_position);
  AppendSection(&file, fmt::kPipeline, pipeline);
  PutKeyValues(&run, c.run_config);
  AppendSection(&file, fmt::kRunConfig, run);
  PutKeyValues(&identity, c.identity);
  AppendSection(&file, fmt::kRunIdentity, identity);
  PutFixed64(&file, Xxh3(file));
  return file;
}

namespace {

// Decodes a checkpoint file section by section (docs/formats/checkpoint.md). The sections are
// walked in order, each checked against its own checksum first, so an error names the damaged
// one; the model section fixes how many tensor sections follow.
class CheckpointDecoder {
 public:
  CheckpointDecoder(absl::string_view data, absl::string_view source)
      : data_(data), source_(source) {}

  absl::StatusOr<Checkpoint> Decode() {
    RETURN_IF_ERROR(CheckHeader());
    size_t offset = fmt::kHeaderSize;
    for (uint64_t index = 0; index < section_count_; ++index) {
      RETURN_IF_ERROR(DecodeSection(index, &offset));
    }
    RETURN_IF_ERROR(CheckTail(offset));
    return std::move(c_);
  }

 private:
  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("corrupt checkpoint ", source_, ": ", what));
  }

  // Size, magic, version; the section count.
  absl::Status CheckHeader() {
    if (data_.size() < static_cast<size_t>(fmt::kHeaderSize + fmt::kFooterSize)) {
      return Corrupt(
          absl::StrCat("file is ", data_.size(), " bytes, shorter than header + footer"));
    }
    if (std::memcmp(data_.data(), fmt::kMagic, sizeof(fmt::kMagic)) != 0) {
      return Corrupt("bad magic (not a sluice checkpoint)");
    }
    const uint32_t version = DecodeFixed32(data_.data() + 8);
    if (version != fmt::kVersion) {
      return Corrupt(absl::StrCat("unsupported checkpoint version ", version, " (this build reads ",
                                  fmt::kVersion, ")"));
    }
    section_count_ = DecodeFixed32(data_.data() + 12);
    body_end_ = data_.size() - fmt::kFooterSize;
    return absl::OkStatus();
  }

  // The type section `index` must have: model, position, the tensors, pipeline, run config,
  // run identity.
  absl::StatusOr<uint32_t> ExpectedType(uint64_t index, const PayloadReader& r) const {
    if (index == 0) return fmt::kModel;
    if (index == 1) return fmt::kPosition;
    if (tensors_seen_ < tensors_expected_) return fmt::kTensor;
    if (index == 2 + tensors_expected_) return fmt::kPipeline;
    if (index == 3 + tensors_expected_) return fmt::kRunConfig;
    if (index == 4 + tensors_expected_) return fmt::kRunIdentity;
    return r.Error("more sections than the model and optimizer need");
  }

  absl::Status DecodeSection(uint64_t index, size_t* offset) {
    const std::string where_prefix = absl::StrCat("section ", index, " at offset ", *offset);
    if (body_end_ - *offset <
            static_cast<size_t>(fmt::kSectionHeaderSize + fmt::kSectionChecksumSize) ||
        *offset > body_end_) {
      return Corrupt(
          absl::StrCat(where_prefix, ": truncated (", section_count_, " sections declared)"));
    }
    const uint32_t type = DecodeFixed32(data_.data() + *offset);
    const uint32_t reserved = DecodeFixed32(data_.data() + *offset + 4);
    const uint64_t length = DecodeFixed64(data_.data() + *offset + 8);
    const size_t room = body_end_ - *offset - fmt::kSectionHeaderSize - fmt::kSectionChecksumSize;
    if (length > room) {
      return Corrupt(absl::StrCat(where_prefix, ": length ", length, " overruns the file"));
    }
    const size_t payload_at = *offset + fmt::kSectionHeaderSize;
    const uint64_t stored = DecodeFixed64(data_.data() + payload_at + length);
    const uint64_t actual = Xxh3(data_.substr(*offset, fmt::kSectionHeaderSize + length));
    const std::string where =
        absl::StrCat(source_, " (", SectionName(type), " ", where_prefix, ")");
    if (stored != actual) {
      return absl::DataLossError(
          absl::StrCat("corrupt checkpoint ", where, ": section checksum mismatch (stored ",
                       ChecksumToHex(stored), ", computed ", ChecksumToHex(actual), ")"));
    }
    PayloadReader r(data_.substr(payload_at, length), where);
    if (reserved != 0) return r.Error("reserved field is not 0");
    ASSIGN_OR_RETURN(uint32_t expected_type, ExpectedType(index, r));
    if (type != expected_type) {
      return r.Error(absl::StrCat("section type ", type, " where ", SectionName(expected_type),
                                  " was expected"));
    }
    switch (type) {
      case fmt::kModel:
        RETURN_IF_ERROR(DecodeModel(r));
        break;
      case fmt::kPosition: {
        ASSIGN_OR_RETURN(uint64_t steps, r.Fixed64());
        c_.state.optimizer_steps = static_cast<int64_t>(steps);
        ASSIGN_OR_RETURN(c_.epoch, r.Fixed64());
        ASSIGN_OR_RETURN(c_.step_in_epoch, r.Fixed64());
        ASSIGN_OR_RETURN(c_.seed, r.Fixed64());
        ASSIGN_OR_RETURN(c_.samples_in_epoch, r.Fixed64());
        ASSIGN_OR_RETURN(c_.samples_total, r.Fixed64());
        break;
      }
      case fmt::kTensor: {
        const bool is_param = tensors_seen_ < shapes_.size();
        ASSIGN_OR_RETURN(HostTensor t,
                         ReadTensor(r, is_param ? fmt::kParameter : fmt::kOptimizerState,
                                    shapes_[tensors_seen_ % shapes_.size()]));
        (is_param ? c_.state.params : c_.state.opt_state).push_back(std::move(t));
        ++tensors_seen_;
        break;
      }
      case fmt::kPipeline: {
        ASSIGN_OR_RETURN(c_.pipeline_position, r.ReadKeyValues());
        break;
      }
      case fmt::kRunConfig: {
        ASSIGN_OR_RETURN(c_.run_config, r.ReadKeyValues());
        break;
      }
      case fmt::kRunIdentity: {
        ASSIGN_OR_RETURN(c_.identity, r.ReadKeyValues());
        break;
      }
    }
    RETURN_IF_ERROR(r.ExpectEnd());
    *offset = payload_at + length + fmt::kSectionChecksumSize;
    return absl::OkStatus();
  }

  // The layer sizes; they give every tensor's shape and, with the section count, how many
  // optimizer-state slots follow the parameters.
  absl::Status DecodeModel(PayloadReader& r) {
    ASSIGN_OR_RETURN(uint32_t num_sizes, r.Fixed32());
    if (num_sizes < 2 || num_sizes > 1024) return r.Error(absl::StrCat(num_sizes, " layer sizes"));
    for (uint32_t i = 0; i < num_sizes; ++i) {
      ASSIGN_OR_RETURN(uint32_t size, r.Fixed32());
      if (size < 1 || size > kMaxLayerSize) return r.Error(absl::StrCat("layer size ", size));
      if (i == 0) c_.state.model.layers.clear();
      c_.state.model.layers.push_back(static_cast<int>(size));
    }
    const size_t num_linear = num_sizes - 1;
    for (size_t k = 0; k < num_linear; ++k) {
      shapes_.push_back({c_.state.model.layers[k + 1], c_.state.model.layers[k]});
      shapes_.push_back({c_.state.model.layers[k + 1]});
    }
    // Parameters, then 0..2 optimizer-state slots: the section count says how many.
    const uint64_t tensors = section_count_ - fmt::kFixedSections;
    if (section_count_ < fmt::kFixedSections || tensors % shapes_.size() != 0 ||
        tensors / shapes_.size() > 3) {
      return r.Error(
          absl::StrCat(section_count_, " sections cannot hold a model of ", num_linear, " layers"));
    }
    tensors_expected_ = tensors;
    return absl::OkStatus();
  }

  // Every section present, nothing between the last one and the footer, the file checksum.
  absl::Status CheckTail(size_t offset) const {
    if (section_count_ < fmt::kFixedSections + tensors_expected_ ||
        tensors_seen_ != tensors_expected_) {
      return Corrupt(absl::StrCat("only ", section_count_, " sections"));
    }
    if (offset != body_end_) {
      return Corrupt(absl::StrCat(body_end_ - offset, " bytes between the last section (ending at ",
                                  offset, ") and the footer"));
    }
    const uint64_t stored = DecodeFixed64(data_.data() + body_end_);
    const uint64_t actual = Xxh3(data_.substr(0, body_end_));
    if (stored != actual) {
      return Corrupt(absl::StrCat("file checksum mismatch (stored ", ChecksumToHex(stored),
                                  ", computed ", ChecksumToHex(actual), ")"));
    }
    return absl::OkStatus();
  }

  absl::string_view data_;
  absl::string_view source_;
  uint64_t section_count_ = 0;
  size_t body_end_ = 0;
  Checkpoint c_;
  size_t tensors_expected_ = 0;
  size_t tensors_seen_ = 0;
  std::vector<std::vector<int64_t>> shapes_;  // PyTorch shape of each parameter
};

}  // namespace

absl::StatusOr<Checkpoint> DecodeCheckpoint(absl::string_view data, absl::string_view source) {
  return CheckpointDecoder(data, source).Decode();
}

absl::Status WriteCheckpoint(Env* env, const std::string& path, const Checkpoint& checkpoint) {
  ASSIGN_OR_RETURN(std::string data, EncodeCheckpoint(checkpoint));
  return WriteFileAtomically(env, path, data);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, ReadFileToString(env, path));
  return DecodeCheckpoint(data, path);
}

}  // namespace sluice
