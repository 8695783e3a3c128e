#include "engine/safetensors.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/coding.h"
#include "nlohmann/json.hpp"

namespace sluice {

std::string EncodeSafetensors(const ModelState& state) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {
      {"format", "pt"}, {"producer", "sluice"}, {"layers", absl::StrJoin(state.model.layers, ",")}};
  uint64_t offset = 0;
  for (const HostTensor& t : state.params) {
    const uint64_t bytes = 4 * t.values.size();
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string file;
  file.reserve(8 + json.size() + offset);
  PutFixed64(&file, json.size());
  file += json;
  for (const HostTensor& t : state.params) {
    for (float v : t.values) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      PutFixed32(&file, bits);
    }
  }
  return file;
}

absl::Status ExportSafetensors(Env* env, const std::string& path, const ModelState& state) {
  return WriteFileAtomically(env, path, EncodeSafetensors(state));
}

absl::StatusOr<std::vector<HostTensor>> DecodeSafetensors(absl::string_view data,
                                                          absl::string_view source) {
  auto corrupt = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("bad safetensors file ", source, ": ", what));
  };
  if (data.size() < 8) return corrupt("shorter than the 8-byte header length");
  const uint64_t header_len = DecodeFixed64(data.data());
  if (header_len > data.size() - 8) return corrupt("header length overruns the file");
  const absl::string_view body = data.substr(8 + header_len);
  nlohmann::json header = nlohmann::json::parse(data.substr(8, header_len), nullptr, false);
  if (header.is_discarded() || !header.is_object()) return corrupt("header is not a JSON object");
  std::vector<std::pair<uint64_t, HostTensor>> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& info = it.value();
    if (!info.is_object() || info.value("dtype", "") != "F32" || !info.contains("shape") ||
        !info.contains("data_offsets") || info["data_offsets"].size() != 2) {
      return corrupt(absl::StrCat("tensor '", it.key(), "' is not an F32 tensor entry"));
    }
    const nlohmann::json& offsets = info["data_offsets"];
    if (!info["shape"].is_array() || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      return corrupt(absl::StrCat("tensor '", it.key(), "' has a malformed shape or offsets"));
    }
    HostTensor t;
    t.name = it.key();
    uint64_t count = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) return corrupt(absl::StrCat("tensor '", t.name, "' shape"));
      t.shape.push_back(d.get<int64_t>());
      count *= d.get<uint64_t>();
    }
    const uint64_t begin = info["data_offsets"][0].get<uint64_t>();
    const uint64_t end = info["data_offsets"][1].get<uint64_t>();
    if (begin > end || end > body.size() || end - begin != 4 * count) {
      return corrupt(absl::StrCat("tensor '", t.name, "' data_offsets do not fit"));
    }
    t.values.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t bits = DecodeFixed32(body.data() + begin + 4 * i);
      std::memcpy(&t.values[i], &bits, 4);
    }
    tensors.emplace_back(begin, std::move(t));
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<HostTensor> out;
  for (auto& [begin, t] : tensors) out.push_back(std::move(t));
  return out;
}

}  // namespace sluice
