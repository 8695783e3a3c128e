#include "storage/dataset.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/json_depth.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace sluice {
namespace {

using Json = nlohmann::ordered_json;

// The manifest's field order is part of the format (byte-identical output), hence ordered_json.
Json ObjectOf(std::initializer_list<std::pair<const char*, Json>> fields) {
  Json j = Json::object();
  for (const auto& [k, v] : fields) j[k] = v;
  return j;
}

// Typed field access that reports what was expected instead of throwing.
class Fields {
 public:
  Fields(const Json& j, std::string where, const std::string& path)
      : j_(j), where_(std::move(where)), path_(path) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(path_, ": ", where_, key, ": ", what));
  }
  absl::StatusOr<const Json*> Get(absl::string_view key) const {
    if (!j_.is_object()) return Error("", "expected a JSON object");
    auto it = j_.find(std::string(key));
    if (it == j_.end()) return Error(key, "missing");
    return &*it;
  }
  absl::StatusOr<uint64_t> U64(absl::string_view key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_number_unsigned()) return Error(key, "expected a non-negative integer");
    return v->get<uint64_t>();
  }
  absl::StatusOr<int64_t> I64(absl::string_view key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_number_integer()) return Error(key, "expected an integer");
    return v->get<int64_t>();
  }
  absl::StatusOr<std::string> Str(absl::string_view key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(key));
    if (!v->is_string()) return Error(key, "expected a string");
    return v->get<std::string>();
  }
  absl::StatusOr<uint64_t> Hex(absl::string_view key) const {
    ASSIGN_OR_RETURN(std::string s, Str(key));
    uint64_t v = 0;
    if (s.size() != 16 || !absl::SimpleHexAtoi(s, &v)) {
      return Error(key, "expected 16 hex digits");
    }
    return v;
  }
  bool Has(absl::string_view key) const { return j_.is_object() && j_.contains(std::string(key)); }

 private:
  const Json& j_;
  std::string where_;
  const std::string& path_;
};

// The "dtype" field of `f`, parsed by `parse` (ParseSampleDType, ParseLabelDType); its error
// message is reported at the field.
template <typename T>
absl::StatusOr<T> DTypeField(const Fields& f, absl::StatusOr<T> (*parse)(absl::string_view)) {
  ASSIGN_OR_RETURN(std::string name, f.Str("dtype"));
  absl::StatusOr<T> t = parse(name);
  if (!t.ok()) return f.Error("dtype", t.status().message());
  return t;
}

// A name inside the manifest's directory. A NUL would end the name the system opens early (and
// the messages that print it), so it is refused like '/'.
bool IsPlainFileName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." && !absl::StrContains(name, '/') &&
         !absl::StrContains(name, '\0');
}

// What a refused name was, printable: escaped as a C string ("a\x00b").
std::string NotAPlainName(absl::string_view name) {
  return absl::StrCat("\"", absl::CHexEscape(name),
                      "\" is not a plain file name (no '/', NUL, '.' or '..')");
}

// The "sample" object: a dtype and shape (version 1), or u8 and an encoding (version 2).
absl::Status ParseSample(const Fields& sf, bool encoded, RecordSpec* spec) {
  ASSIGN_OR_RETURN(spec->sample_dtype, DTypeField(sf, &ParseSampleDType));
  if (encoded) {
    if (spec->sample_dtype != SampleDType::kU8) {
      return sf.Error("dtype", "expected \"u8\" for encoded samples");
    }
    ASSIGN_OR_RETURN(std::string name, sf.Str("encoding"));
    absl::StatusOr<SampleEncoding> e = ParseSampleEncoding(name);
    if (!e.ok()) return sf.Error("encoding", e.status().message());
    spec->encoding = *e;
    spec->height = spec->width = spec->channels = 0;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(uint64_t height, sf.U64("height"));
  ASSIGN_OR_RETURN(uint64_t width, sf.U64("width"));
  ASSIGN_OR_RETURN(uint64_t channels, sf.U64("channels"));
  if (height == 0 || width == 0 || channels == 0 || height > UINT32_MAX || width > UINT32_MAX ||
      channels > UINT32_MAX) {
    return sf.Error("height/width/channels", "expected each in [1, 2^32)");
  }
  spec->height = static_cast<uint32_t>(height);
  spec->width = static_cast<uint32_t>(width);
  spec->channels = static_cast<uint32_t>(channels);
  return absl::OkStatus();
}

// sample.max_width, max_height and max_pixels of an encoded split: all three or none; then
// max_pixels_record, optional, only with them.
absl::Status ParseImageBound(const Fields& sf, Manifest* m) {
  if (!sf.Has("max_width") && !sf.Has("max_height") && !sf.Has("max_pixels")) {
    if (sf.Has("max_pixels_record")) {
      return sf.Error("max_pixels_record", "expected only with max_width, max_height, max_pixels");
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(uint64_t width, sf.U64("max_width"));
  ASSIGN_OR_RETURN(uint64_t height, sf.U64("max_height"));
  ASSIGN_OR_RETURN(uint64_t pixels, sf.U64("max_pixels"));
  if (width == 0 || width > INT32_MAX) return sf.Error("max_width", "expected in [1, 2^31)");
  if (height == 0 || height > INT32_MAX) return sf.Error("max_height", "expected in [1, 2^31)");
  if (pixels == 0 || pixels > width * height) {
    return sf.Error("max_pixels",
                    absl::StrCat(pixels, ", expected in [1, max_width x max_height]"));
  }
  m->image_bound =
      ImageSizeBound{static_cast<uint32_t>(width), static_cast<uint32_t>(height), pixels};
  if (sf.Has("max_pixels_record")) {
    ASSIGN_OR_RETURN(uint64_t record, sf.U64("max_pixels_record"));
    if (record >= m->record_count) {
      return sf.Error("max_pixels_record", absl::StrCat(record, ", expected in [0, record_count ",
                                                        m->record_count, ")"));
    }
    m->max_pixels_record = record;
  }
  return absl::OkStatus();
}

// label.classes: one string per class, as many as num_classes.
absl::Status ParseClassNames(const Fields& lf, Manifest* m) {
  ASSIGN_OR_RETURN(const Json* classes, lf.Get("classes"));
  if (!classes->is_array() || !m->num_classes || classes->size() != *m->num_classes) {
    return lf.Error("classes", absl::StrCat("expected an array of num_classes (",
                                            m->num_classes ? *m->num_classes : 0, ") names"));
  }
  for (const Json& name : *classes) {
    if (!name.is_string()) return lf.Error("classes", "expected strings");
    m->class_names.push_back(name.get<std::string>());
  }
  return absl::OkStatus();
}

// label.class_counts: num_classes non-negative integers adding up to record_count.
absl::Status ParseClassCounts(const Fields& lf, Manifest* m) {
  ASSIGN_OR_RETURN(const Json* counts, lf.Get("class_counts"));
  if (!counts->is_array() || !m->num_classes || counts->size() != *m->num_classes) {
    return lf.Error("class_counts",
                    absl::StrCat("expected an array of num_classes (",
                                 m->num_classes ? *m->num_classes : 0, ") record counts"));
  }
  uint64_t sum = 0;
  for (const Json& count : *counts) {
    if (!count.is_number_unsigned()) {
      return lf.Error("class_counts", "expected non-negative integers");
    }
    const uint64_t n = count.get<uint64_t>();
    if (n > m->record_count - sum) {
      return lf.Error("class_counts", absl::StrCat("the counts add up to more than record_count ",
                                                   m->record_count));
    }
    sum += n;
    m->class_counts.push_back(n);
  }
  if (sum != m->record_count) {
    return lf.Error("class_counts", absl::StrCat("the counts add up to ", sum,
                                                 ", expected record_count ", m->record_count));
  }
  return absl::OkStatus();
}

// The "options" object; encoded splits add frame_bytes and codec, and have zstd_level only
// with codec zstd.
absl::Status ParseOptions(const Fields& of, bool encoded, ShardingOptions* o) {
  ASSIGN_OR_RETURN(o->records_per_shard, of.U64("records_per_shard"));
  ASSIGN_OR_RETURN(uint64_t rpf, of.U64("records_per_frame"));
  if (o->records_per_shard == 0) return of.Error("records_per_shard", "expected >= 1");
  if (rpf == 0 || rpf > UINT32_MAX) return of.Error("records_per_frame", "expected in [1, 2^32)");
  o->records_per_frame = static_cast<uint32_t>(rpf);
  o->codec = FrameCodec::kZstd;
  if (encoded) {
    ASSIGN_OR_RETURN(uint64_t frame_bytes, of.U64("frame_bytes"));
    if (frame_bytes == 0 || frame_bytes > kMaxFrameBytes) {
      return of.Error("frame_bytes", "expected in [1, 2^31]");
    }
    o->frame_bytes = static_cast<uint32_t>(frame_bytes);
    ASSIGN_OR_RETURN(std::string codec, of.Str("codec"));
    absl::StatusOr<FrameCodec> c = ParseFrameCodec(codec);
    if (!c.ok()) return of.Error("codec", c.status().message());
    o->codec = *c;
  }
  if (o->codec == FrameCodec::kZstd) {
    ASSIGN_OR_RETURN(int64_t level, of.I64("zstd_level"));
    o->zstd_level = static_cast<int>(level);
  }
  return absl::OkStatus();
}

}  // namespace

std::string Manifest::ToJson() const {
  Json shards_json = Json::array();
  for (const ShardEntry& s : shards) {
    Json entry = ObjectOf({{"file", s.file},
                           {"first_record", s.first_record},
                           {"record_count", s.record_count},
                           {"frame_count", s.frame_count},
                           {"bytes", s.bytes},
                           {"xxh3", ChecksumToHex(s.xxh3)}});
    if (s.meta_xxh3) entry["meta_xxh3"] = ChecksumToHex(*s.meta_xxh3);
    shards_json.push_back(std::move(entry));
  }
  Json label_json = ObjectOf({{"dtype", std::string(LabelDTypeName(spec.label_dtype))}});
  if (num_classes) label_json["num_classes"] = *num_classes;
  if (!class_names.empty()) label_json["classes"] = class_names;
  if (!class_counts.empty()) label_json["class_counts"] = class_counts;
  Json sources_json = Json::array();
  for (const SourceEntry& s : sources) {
    sources_json.push_back(ObjectOf(
        {{"role", s.role}, {"file", s.file}, {"bytes", s.bytes}, {"xxh3", ChecksumToHex(s.xxh3)}}));
  }
  // Encoded samples (version 2) have an encoding instead of a shape, and frames cut by size.
  Json sample_json = spec.encoded()
                         ? ObjectOf({{"dtype", std::string(SampleDTypeName(spec.sample_dtype))},
                                     {"encoding", std::string(SampleEncodingName(spec.encoding))}})
                         : ObjectOf({{"dtype", std::string(SampleDTypeName(spec.sample_dtype))},
                                     {"height", spec.height},
                                     {"width", spec.width},
                                     {"channels", spec.channels}});
  if (spec.encoded() && image_bound) {
    sample_json["max_width"] = image_bound->max_width;
    sample_json["max_height"] = image_bound->max_height;
    sample_json["max_pixels"] = image_bound->max_pixels;
    if (max_pixels_record) sample_json["max_pixels_record"] = *max_pixels_record;
  }
  Json options_json = ObjectOf({{"records_per_shard", options.records_per_shard},
                                {"records_per_frame", options.records_per_frame}});
  if (spec.encoded()) {
    options_json["frame_bytes"] = options.frame_bytes;
    options_json["codec"] = std::string(FrameCodecName(options.codec));
  }
  if (!spec.encoded() || options.codec == FrameCodec::kZstd) {
    options_json["zstd_level"] = options.zstd_level;
  }
  Json j = ObjectOf({
      {"format", "sluice-dataset"},
      {"version", spec.encoded() ? 2 : 1},
      {"split", split},
      {"record_count", record_count},
      {"sample", sample_json},
      {"label", label_json},
      {"options", options_json},
      {"shards", shards_json},
      {"sources", sources_json},
  });
  if (!record_sources.empty()) j["record_sources"] = record_sources;
  return j.dump(2) + "\n";
}

absl::StatusOr<Manifest> Manifest::FromJson(absl::string_view json, const std::string& path) {
  RETURN_IF_ERROR(CheckJsonNesting(json, path));
  Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::DataLossError(absl::StrCat(path, ": not valid JSON (truncated or corrupt?)"));
  }
  Fields top(j, "", path);
  Manifest m;
  ASSIGN_OR_RETURN(std::string format, top.Str("format"));
  if (format != "sluice-dataset") return top.Error("format", "expected \"sluice-dataset\"");
  ASSIGN_OR_RETURN(uint64_t version, top.U64("version"));
  if (version != 1 && version != 2) {
    return top.Error("version", absl::StrCat("unsupported version ", version, ", expected 1 or 2"));
  }
  const bool encoded = version == 2;
  ASSIGN_OR_RETURN(m.split, top.Str("split"));
  // The writers' own check (shard_format.h): a name no writer writes is refused here too.
  if (absl::Status named = CheckSplitName(m.split); !named.ok()) {
    return top.Error("split", named.message());
  }
  if (absl::EndsWith(path, kManifestSuffix) && BaseName(path) != ManifestFileName(m.split)) {
    return top.Error("split", absl::StrCat("\"", m.split, "\" does not match the file name"));
  }
  ASSIGN_OR_RETURN(m.record_count, top.U64("record_count"));
  if (m.record_count == 0) return top.Error("record_count", "expected >= 1");

  ASSIGN_OR_RETURN(const Json* sample, top.Get("sample"));
  RETURN_IF_ERROR(ParseSample(Fields(*sample, "sample.", path), encoded, &m.spec));
  if (encoded) RETURN_IF_ERROR(ParseImageBound(Fields(*sample, "sample.", path), &m));
  ASSIGN_OR_RETURN(const Json* label, top.Get("label"));
  Fields lf(*label, "label.", path);
  ASSIGN_OR_RETURN(m.spec.label_dtype, DTypeField(lf, &ParseLabelDType));
  if (lf.Has("num_classes")) {
    ASSIGN_OR_RETURN(uint64_t classes, lf.U64("num_classes"));
    const uint64_t most = m.spec.label_dtype == LabelDType::kU8 ? 256 : INT32_MAX;
    if (classes == 0 || classes > most) {
      return lf.Error("num_classes", absl::StrCat(classes, ", expected in [1, ", most, "] for ",
                                                  LabelDTypeName(m.spec.label_dtype), " labels"));
    }
    m.num_classes = static_cast<uint32_t>(classes);
  }
  if (lf.Has("classes")) RETURN_IF_ERROR(ParseClassNames(lf, &m));
  if (lf.Has("class_counts")) RETURN_IF_ERROR(ParseClassCounts(lf, &m));

  ASSIGN_OR_RETURN(const Json* options, top.Get("options"));
  RETURN_IF_ERROR(ParseOptions(Fields(*options, "options.", path), encoded, &m.options));

  ASSIGN_OR_RETURN(const Json* shards, top.Get("shards"));
  if (!shards->is_array() || shards->empty()) {
    return top.Error("shards", "expected a non-empty array");
  }
  uint64_t next_record = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    Fields f((*shards)[i], absl::StrCat("shards[", i, "]."), path);
    ShardEntry s;
    ASSIGN_OR_RETURN(s.file, f.Str("file"));
    if (!IsPlainFileName(s.file)) return f.Error("file", NotAPlainName(s.file));
    ASSIGN_OR_RETURN(s.first_record, f.U64("first_record"));
    ASSIGN_OR_RETURN(s.record_count, f.U64("record_count"));
    ASSIGN_OR_RETURN(uint64_t frames, f.U64("frame_count"));
    ASSIGN_OR_RETURN(s.bytes, f.U64("bytes"));
    ASSIGN_OR_RETURN(s.xxh3, f.Hex("xxh3"));
    if (f.Has("meta_xxh3")) {
      ASSIGN_OR_RETURN(s.meta_xxh3, f.Hex("meta_xxh3"));
    }
    if (s.first_record != next_record) {
      return f.Error("first_record", absl::StrCat(s.first_record, ", expected ", next_record));
    }
    const bool last = i + 1 == shards->size();
    if (s.record_count == 0 || s.record_count > m.options.records_per_shard ||
        (!last && s.record_count != m.options.records_per_shard)) {
      return f.Error("record_count",
                     absl::StrCat(s.record_count, ", expected ", m.options.records_per_shard,
                                  last ? " or fewer" : ""));
    }
    const uint64_t want_frames =
        (s.record_count + m.options.records_per_frame - 1) / m.options.records_per_frame;
    // Encoded records: frames are also closed at frame_bytes, so there may be more (at most
    // one per record).
    if (encoded ? frames < want_frames || frames > s.record_count : frames != want_frames) {
      return f.Error("frame_count",
                     absl::StrCat(frames, ", expected ", encoded ? "at least " : "", want_frames,
                                  encoded ? absl::StrCat(" and at most ", s.record_count) : ""));
    }
    s.frame_count = static_cast<uint32_t>(frames);
    next_record += s.record_count;
    m.shards.push_back(std::move(s));
  }
  if (next_record != m.record_count) {
    return top.Error("record_count",
                     absl::StrCat(m.record_count, ", but the shards hold ", next_record));
  }

  ASSIGN_OR_RETURN(const Json* sources, top.Get("sources"));
  if (!sources->is_array()) return top.Error("sources", "expected an array");
  for (size_t i = 0; i < sources->size(); ++i) {
    Fields f((*sources)[i], absl::StrCat("sources[", i, "]."), path);
    SourceEntry s;
    ASSIGN_OR_RETURN(s.role, f.Str("role"));
    ASSIGN_OR_RETURN(s.file, f.Str("file"));
    ASSIGN_OR_RETURN(s.bytes, f.U64("bytes"));
    ASSIGN_OR_RETURN(s.xxh3, f.Hex("xxh3"));
    m.sources.push_back(std::move(s));
  }
  if (top.Has("record_sources")) {
    ASSIGN_OR_RETURN(const Json* rs, top.Get("record_sources"));
    if (!encoded || !rs->is_array() || rs->size() != m.record_count) {
      return top.Error("record_sources",
                       absl::StrCat("expected an array of record_count (", m.record_count,
                                    ") file names in an encoded split"));
    }
    m.record_sources.reserve(rs->size());
    for (const Json& name : *rs) {
      if (!name.is_string()) return top.Error("record_sources", "expected strings");
      m.record_sources.push_back(name.get<std::string>());
    }
  }
  return m;
}

Dataset::Dataset(Env* env, std::string dir, std::string manifest_path, Manifest m)
    : env_(env),
      dir_(std::move(dir)),
      manifest_path_(std::move(manifest_path)),
      manifest_(std::move(m)),
      readers_(manifest_.shards.size()) {}

absl::Status NoManifestError(Env* env, const std::string& dir,
                             const std::vector<std::string>& children) {
  // A few entries tell an image folder: its class subfolders, or images at its top.
  bool images = false;
  for (size_t i = 0; i < children.size() && i < 64 && !images; ++i) {
    const std::string name = absl::AsciiStrToLower(children[i]);
    images = absl::EndsWith(name, ".jpg") || absl::EndsWith(name, ".jpeg") ||
             absl::EndsWith(name, ".png") || env->GetChildren(JoinPath(dir, children[i])).ok();
  }
  return absl::NotFoundError(absl::StrCat(
      dir, ": no *", kManifestSuffix, " (not a dataset, or its writing did not finish)",
      images ? absl::StrCat("; it holds folders or images: to train on an image folder, shard it "
                            "once (sluice-shard create --image-folder ",
                            dir, " --out DATA) and give DATA")
             : ""));
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(Env* env, const std::string& path,
                                                       absl::string_view default_split,
                                                       ShardFiles files) {
  std::string manifest_path = path;
  if (!absl::EndsWith(path, kManifestSuffix)) {
    auto children = env->GetChildren(path);
    // A URL's store that could not be asked (unreachable, access denied) says so as it is.
    if (!children.ok() && children.status().code() != absl::StatusCode::kNotFound &&
        absl::StrContains(path, "://")) {
      return children.status();
    }
    if (!children.ok()) {
      return absl::NotFoundError(absl::StrCat(path, ": expected a dataset directory or a *",
                                              kManifestSuffix, " file (",
                                              children.status().message(), ")"));
    }
    std::vector<std::string> manifests;
    for (const std::string& c : *children) {
      if (absl::EndsWith(c, kManifestSuffix)) manifests.push_back(c);
    }
    const std::string preferred = ManifestFileName(default_split);
    if (std::find(manifests.begin(), manifests.end(), preferred) != manifests.end()) {
      manifest_path = JoinPath(path, preferred);
    } else if (manifests.size() == 1) {
      manifest_path = JoinPath(path, manifests[0]);
    } else if (manifests.empty()) {
      return NoManifestError(env, path, *children);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ": holds ", manifests.size(),
                                                     " manifests and none of split \"",
                                                     default_split, "\"; name the manifest file"));
    }
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, manifest_path));
  ASSIGN_OR_RETURN(Manifest m, Manifest::FromJson(text, manifest_path));
  // Shards stay open once read: a split of more shards than `ulimit -n` failed half way with
  // "Too many open files".
  if (files == ShardFiles::kKeepOpen) {
    RETURN_IF_ERROR(
        ReserveOpenFiles(m.shards.size(), "shard files",
                         absl::StrCat(manifest_path, " (", m.shards.size(), " shards)")));
  }
  return std::unique_ptr<Dataset>(
      new Dataset(env, DirName(manifest_path), manifest_path, std::move(m)));
}

absl::StatusOr<std::string> Dataset::SiblingManifest(absl::string_view split) const {
  std::string p = JoinPath(dir_, ManifestFileName(split));
  if (!env_->FileExists(p)) {
    return absl::NotFoundError(
        absl::StrCat(p, ": no split \"", split, "\" beside ", manifest_path_));
  }
  return p;
}

absl::StatusOr<const ShardReader*> Dataset::shard(size_t i) const {
  if (i >= manifest_.shards.size()) {
    return absl::OutOfRangeError(absl::StrCat(manifest_path_, ": shard ", i, " requested, ",
                                              manifest_.shards.size(), " exist"));
  }
  absl::MutexLock l(&mu_);
  if (readers_[i] != nullptr) return readers_[i].get();
  ASSIGN_OR_RETURN(readers_[i], OpenShard(i));
  return readers_[i].get();
}

absl::Status Dataset::OpenAllShards(int concurrency) const {
  std::vector<size_t> missing;
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < readers_.size(); ++i) {
      if (readers_[i] == nullptr) missing.push_back(i);
    }
  }
  if (missing.size() <= 1) return absl::OkStatus();  // shard(i) opens it
  std::vector<absl::StatusOr<std::unique_ptr<ShardReader>>> opened(missing.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k = next.fetch_add(1); k < missing.size(); k = next.fetch_add(1)) {
      opened[k] = OpenShard(missing[k]);
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(missing.size(), static_cast<size_t>(std::max(1, concurrency)));
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  absl::MutexLock l(&mu_);
  for (size_t k = 0; k < missing.size(); ++k) {
    if (!opened[k].ok()) return opened[k].status();
    if (readers_[missing[k]] == nullptr) readers_[missing[k]] = std::move(*opened[k]);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardReader>> Dataset::OpenShard(size_t i) const {
  if (i >= manifest_.shards.size()) {
    return absl::OutOfRangeError(absl::StrCat(manifest_path_, ": shard ", i, " requested, ",
                                              manifest_.shards.size(), " exist"));
  }
  const ShardEntry& e = manifest_.shards[i];
  const std::string path = JoinPath(dir_, e.file);
  absl::StatusOr<std::unique_ptr<ShardReader>> opened = ShardReader::Open(env_, path);
  if (opened.status().code() == absl::StatusCode::kNotFound) {
    // Also what a reader sees when the split was rewritten after it read the manifest
    // (docs/formats/shard.md, "Readers during a rewrite").
    return absl::NotFoundError(absl::StrCat(
        path, ": shard ", i, " named by ", manifest_path_,
        " does not exist (was the split rewritten since the manifest was read? open it again)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, std::move(opened));
  const ShardHeader& h = r->header();
  auto mismatch = [&](absl::string_view field, auto shard_value, auto manifest_value) {
    return absl::DataLossError(absl::StrCat(path, ": header: ", field, " ", shard_value,
                                            " disagrees with ", manifest_path_, " (expected ",
                                            manifest_value, ")"));
  };
  if (!(h.spec == manifest_.spec)) {
    return absl::DataLossError(
        absl::StrCat(path, ": header: record shape/dtypes disagree with ", manifest_path_));
  }
  if (h.record_count != e.record_count) {
    return mismatch("record_count", h.record_count, e.record_count);
  }
  if (h.first_record != e.first_record) {
    return mismatch("first_record", h.first_record, e.first_record);
  }
  if (h.frame_count != e.frame_count) return mismatch("frame_count", h.frame_count, e.frame_count);
  if (h.records_per_frame != manifest_.options.records_per_frame) {
    return mismatch("records_per_frame", h.records_per_frame, manifest_.options.records_per_frame);
  }
  if (h.spec.encoded() && h.codec != manifest_.options.codec) {
    return mismatch("codec", FrameCodecName(h.codec), FrameCodecName(manifest_.options.codec));
  }
  if (h.shard_index != i) return mismatch("shard_index", h.shard_index, i);
  if (r->file_size() != e.bytes) return mismatch("file size", r->file_size(), e.bytes);
  if (e.meta_xxh3 && r->meta_checksum() != *e.meta_xxh3) {
    // Same shape, counts and size, other content: a shard of another split or dataset copied
    // under this name. Caught here, at open, without reading the frames.
    return absl::DataLossError(absl::StrCat(
        path, ": meta_checksum ", ChecksumToHex(r->meta_checksum()), " disagrees with ",
        manifest_path_, " (expected meta_xxh3 ", ChecksumToHex(*e.meta_xxh3),
        "): the file is not the shard the manifest names (copied from another split or "
        "dataset?)"));
  }
  return r;
}

absl::Status VerifyDataset(const Dataset& dataset, const std::function<void(uint64_t)>& progress) {
  const Manifest& m = dataset.manifest();
  for (size_t i = 0; i < m.shards.size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, dataset.OpenShard(i));
    // Frame checks first: they name the frame and byte offset of a corruption.
    RETURN_IF_ERROR(r->Verify());
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(dataset.env(), r->path()));
    const uint64_t sum = Xxh3(bytes);
    if (sum != m.shards[i].xxh3) {
      return absl::DataLossError(absl::StrCat(r->path(), ": whole-file xxh3 ", ChecksumToHex(sum),
                                              " disagrees with ", dataset.manifest_path(),
                                              " (expected ", ChecksumToHex(m.shards[i].xxh3), ")"));
    }
    if (progress) progress(m.shards[i].record_count);
  }
  return absl::OkStatus();
}

}  // namespace sluice
