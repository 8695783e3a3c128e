#include "storage/file_identity.h"

#include "absl/strings/str_cat.h"

namespace sluice {

FileIdentity IdentityOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

void SameFileFinder::Add(size_t index, const struct stat& st) {
  const auto [at, inserted] = first_.emplace(IdentityOf(st), index);
  if (!inserted && repeats_++ == 0) example_ = {at->second, index};
}

absl::Status SameFileFinder::Check(const std::vector<std::string>& names,
                                   absl::string_view consequence) const {
  if (repeats_ == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      names[example_.first], " and ", names[example_.second],
      " are the same file (one device and inode: the path spelled another way, a hard link or "
      "a symbolic link); ",
      consequence,
      repeats_ > 1 ? absl::StrCat(" (", repeats_, " entries in all repeat an earlier one)") : ""));
}

absl::Status RefuseSameFiles(const std::vector<std::string>& paths,
                             const std::vector<std::string>& names, absl::string_view consequence) {
  SameFileFinder finder;
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st;
    if (::stat(paths[i].c_str(), &st) == 0) finder.Add(i, st);
  }
  return finder.Check(names, consequence);
}

}  // namespace sluice
