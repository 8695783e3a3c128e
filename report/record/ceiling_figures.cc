#include "report/record/ceiling_figures.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/json_fields.h"
#include "common/status_macros.h"

namespace sluice {

// The cache file's fields, in file order (docs/report-schema.md, "ceilings"); "schema" comes
// first and is written and checked by ToJson / FromJson.
SLUICE_DEFINE_JSON_FIELDS(Ceiling, measured, mb_per_s, samples_per_s, items_per_s,
                          fixed_us_per_item, note)
SLUICE_DEFINE_JSON_FIELDS(Ceilings, key, hostname, build, measured_at, other_cores_busy, read,
                          decompress, decode, preprocess, pinned_memcpy, h2d_pinned, h2d_pageable,
                          compute)

std::string Ceilings::CachePath(const std::string& cache_dir, const std::string& key) {
  return JoinPath(JoinPath(cache_dir, "ceilings"), key + ".json");
}

nlohmann::ordered_json Ceilings::ToJson() const {
  nlohmann::ordered_json j;
  j["schema"] = kCeilingsSchema;
  to_json(j, *this);  // appends the fields after "schema"
  return j;
}

absl::StatusOr<Ceilings> Ceilings::FromJson(const nlohmann::ordered_json& j) {
  try {
    if (j.at("schema").get<std::string>() != kCeilingsSchema) {
      return absl::DataLossError(absl::StrCat("ceilings: schema is not ", kCeilingsSchema));
    }
    return j.get<Ceilings>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("ceilings: ", e.what()));
  }
}

absl::Status Ceilings::Save(Env* env, const std::string& path) const {
  RETURN_IF_ERROR(env->CreateDirs(DirName(path)));
  return WriteFileAtomically(env, path, ToJson().dump(2) + "\n");
}

absl::StatusOr<Ceilings> Ceilings::Load(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, path));
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not JSON"));
  absl::StatusOr<Ceilings> c = FromJson(j);
  if (!c.ok()) return absl::DataLossError(absl::StrCat(path, ": ", c.status().message()));
  return c;
}

}  // namespace sluice
