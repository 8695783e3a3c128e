#include "common/file_lock.h"

#include <unistd.h>

#include <ctime>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

constexpr char kMagicKey[] = "sluice-lock";
constexpr char kVersion[] = "1";

std::string OneLine(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"\n", " "}, {"\r", " "}});
}

}  // namespace

std::string LockFileContents(const LockHolder& h) {
  return absl::StrCat(kMagicKey, " ", kVersion, "\n", "pid ", h.pid, "\n", "host ", OneLine(h.host),
                      "\n", "started ", OneLine(h.started), "\n", "purpose ", OneLine(h.purpose),
                      "\n");
}

absl::StatusOr<LockHolder> ParseLockFileContents(absl::string_view text, const std::string& path) {
  auto error = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what,
                                            " (expected the five lines of "
                                            "docs/formats/lock.md)"));
  };
  if (text.empty() || text.back() != '\n') return error("empty or unterminated lock file");
  text.remove_suffix(1);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const char* keys[] = {kMagicKey, "pid", "host", "started", "purpose"};
  if (lines.size() != 5) return error(absl::StrCat(lines.size(), " lines"));
  std::string values[5];
  for (int i = 0; i < 5; ++i) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    if (kv.first != keys[i]) {
      return error(
          absl::StrCat("line ", i + 1, ": key \"", kv.first, "\", expected \"", keys[i], "\""));
    }
    values[i] = std::string(kv.second);
  }
  if (values[0] != kVersion) return error(absl::StrCat("unsupported version ", values[0]));
  LockHolder h;
  if (!absl::SimpleAtoi(values[1], &h.pid) || h.pid <= 0) {
    return error(absl::StrCat("pid \"", values[1], "\" is not a process id"));
  }
  h.host = values[2];
  h.started = values[3];
  h.purpose = values[4];
  return h;
}

LockHolder CurrentProcessHolder(absl::string_view purpose) {
  LockHolder h;
  h.pid = static_cast<int64_t>(::getpid());
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) h.host = host;
  if (h.host.empty()) h.host = "unknown-host";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char buf[32] = {};
  if (::gmtime_r(&now, &tm) != nullptr) std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  h.started = buf;
  h.purpose = std::string(purpose);
  return h;
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(Env* env, const std::string& dir,
                                                            absl::string_view purpose) {
  RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string path = JoinPath(dir, kFileName);
  absl::StatusOr<std::unique_ptr<LockedFile>> file = env->LockFile(path);
  if (!file.ok()) {
    if (file.status().code() != absl::StatusCode::kUnavailable) return file.status();
    std::string holder;
    absl::StatusOr<std::string> text = ReadFileToString(env, path);
    absl::StatusOr<LockHolder> h =
        text.ok() ? ParseLockFileContents(*text, path) : absl::StatusOr<LockHolder>(text.status());
    if (h.ok()) {
      holder = absl::StrCat("pid ", h->pid, " on host ", h->host, " since ", h->started, " (",
                            h->purpose, ")");
    } else {
      holder = "another process, which has not written its pid and host yet";
    }
    return absl::UnavailableError(absl::StrCat(path, ": cannot start ", OneLine(purpose),
                                               ": the directory is locked by ", holder));
  }
  RETURN_IF_ERROR((*file)->WriteContents(LockFileContents(CurrentProcessHolder(purpose))));
  return std::unique_ptr<FileLock>(new FileLock(std::move(*file)));
}

}  // namespace sluice
