#include "report/record/ceiling_figures.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_depth.h"
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
    Ceilings c = j.get<Ceilings>();
    // Each rate a stage could have: finite and between 1e-3 and 1e12 a second (a cache file
    // edited to 1e-308 made the report say "inf% of its ceiling"). A file out of range is not
    // used; the next run measures again.
    for (const auto& [name, ceiling] : {std::pair<const char*, const Ceiling*>{"read", &c.read},
                                        {"decompress", &c.decompress},
                                        {"decode", &c.decode},
                                        {"preprocess", &c.preprocess},
                                        {"pinned_memcpy", &c.pinned_memcpy},
                                        {"h2d_pinned", &c.h2d_pinned},
                                        {"h2d_pageable", &c.h2d_pageable},
                                        {"compute", &c.compute}}) {
      for (const auto& [field, v] : {std::pair<const char*, double>{"mb_per_s", ceiling->mb_per_s},
                                     {"samples_per_s", ceiling->samples_per_s},
                                     {"items_per_s", ceiling->items_per_s},
                                     {"fixed_us_per_item", ceiling->fixed_us_per_item}}) {
        if (!std::isfinite(v) || v < 0 || v > 1e12 || (v > 0 && v < 1e-3)) {
          return absl::DataLossError(absl::StrCat("ceilings: ", name, ".", field, " ", v,
                                                  ": expected 0 or a rate in [1e-3, 1e12]"));
        }
      }
    }
    if (!std::isfinite(c.other_cores_busy) || c.other_cores_busy < 0 || c.other_cores_busy > 1e6) {
      return absl::DataLossError(
          absl::StrCat("ceilings: other_cores_busy ", c.other_cores_busy, ": expected >= 0"));
    }
    return c;
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
  RETURN_IF_ERROR(CheckJsonNesting(text, path));
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not JSON"));
  absl::StatusOr<Ceilings> c = FromJson(j);
  if (!c.ok()) return absl::DataLossError(absl::StrCat(path, ": ", c.status().message()));
  return c;
}

}  // namespace sluice
