// JSON of plain structs through nlohmann-json, each struct's field list written once, with the
// key order of nlohmann::ordered_json kept (the documented outputs pin it). nlohmann 3.11.2's
// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE serializes only nlohmann::json (sorted keys); these do the
// same for any basic_json, ordered_json included, with the same building blocks.
//
//   SLUICE_DEFINE_JSON_FIELDS(Ceiling, measured, mb_per_s, note)  // at namespace scope, next
//                                                                  // to the struct's namespace
//   nlohmann::ordered_json j = ceiling;   // {"measured": ..., "mb_per_s": ..., "note": ...}
//   Ceiling c = j.get<Ceiling>();         // throws nlohmann::json::exception on a missing key
//
//   SLUICE_JSON_SET_FIELDS(j, report, device, cores);  // j["device"] = report.device; ...
//   SLUICE_JSON_GET_FIELDS(j, report, device, cores);  // j.at("device").get_to(report.device)
//
// A std::optional<T> field is written as its value or null, and read back from either.
#ifndef SLUICE_COMMON_JSON_FIELDS_H_
#define SLUICE_COMMON_JSON_FIELDS_H_

#include <optional>

#include "nlohmann/json.hpp"

namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  template <typename BasicJsonType>
  static void to_json(BasicJsonType& j, const std::optional<T>& v) {
    if (v) {
      j = *v;
    } else {
      j = nullptr;
    }
  }
  template <typename BasicJsonType>
  static void from_json(const BasicJsonType& j, std::optional<T>& v) {
    if (j.is_null()) {
      v.reset();
    } else {
      v = j.template get<T>();
    }
  }
};
}  // namespace nlohmann

// json[#field] = object.field, for each field in order (appended to an object json).
#define SLUICE_JSON_SET_FIELDS(json, object, ...)                            \
  do {                                                                       \
    auto& nlohmann_json_j = (json);                                          \
    const auto& nlohmann_json_t = (object);                                  \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__)) \
  } while (false)

// json.at(#field).get_to(object.field), for each field in order.
#define SLUICE_JSON_GET_FIELDS(json, object, ...)                              \
  do {                                                                         \
    const auto& nlohmann_json_j = (json);                                      \
    auto& nlohmann_json_t = (object);                                          \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_FROM, __VA_ARGS__)) \
  } while (false)

// to_json and from_json of `Type` for every basic_json; use in Type's namespace (ADL).
#define SLUICE_DEFINE_JSON_FIELDS(Type, ...)        \
  template <typename BasicJsonType>                 \
  void to_json(BasicJsonType& j, const Type& t) {   \
    SLUICE_JSON_SET_FIELDS(j, t, __VA_ARGS__);      \
  }                                                 \
  template <typename BasicJsonType>                 \
  void from_json(const BasicJsonType& j, Type& t) { \
    SLUICE_JSON_GET_FIELDS(j, t, __VA_ARGS__);      \
  }

#endif  // SLUICE_COMMON_JSON_FIELDS_H_
