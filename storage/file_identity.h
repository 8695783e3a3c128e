// Input files named twice: two entries of one input (two --cifar10 batches, --images and
// --labels, two lines of an image list) that are one file, found by stat(2)'s device and inode
// (symbolic links followed), so the same path spelled another way ("a.bin", "./a.bin",
// "d//a.bin"), a hard link and a symbolic link are all caught. Nothing is opened, so a FIFO
// never blocks. Such a file would be read twice: its records would be in the split twice.
//
// Errors: kInvalidArgument naming both entries as the caller names them.
// Thread safety: SameFileFinder is not thread safe; RefuseSameFiles is stateless.
#ifndef SLUICE_STORAGE_FILE_IDENTITY_H_
#define SLUICE_STORAGE_FILE_IDENTITY_H_

#include <sys/stat.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// A file's identity: stat(2)'s device and inode.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  friend auto operator<=>(const FileIdentity&, const FileIdentity&) = default;
};
FileIdentity IdentityOf(const struct stat& st);

// Collects the identities of an input's entries, in order, and says which repeat an earlier one.
class SameFileFinder {
 public:
  // Notes entry `index`, whose stat(2) (links followed) is `st`.
  void Add(size_t index, const struct stat& st);
  // OK when no two entries noted are one file. Else kInvalidArgument "<names[a]> and
  // <names[b]> are the same file (one device and inode: the path spelled another way, a hard
  // link or a symbolic link); <consequence>", for the first entry b that repeats an earlier a,
  // followed by " (N entries in all repeat an earlier one)" when N > 1.
  absl::Status Check(const std::vector<std::string>& names, absl::string_view consequence) const;

 private:
  std::map<FileIdentity, size_t> first_;  // a file -> the first entry that is it
  size_t repeats_ = 0;
  std::pair<size_t, size_t> example_;
};

// SameFileFinder over `paths`, each looked at with stat(2); a path stat cannot find is left out
// (its reader names it). `names[i]` names paths[i] in the message.
absl::Status RefuseSameFiles(const std::vector<std::string>& paths,
                             const std::vector<std::string>& names, absl::string_view consequence);

}  // namespace sluice

#endif  // SLUICE_STORAGE_FILE_IDENTITY_H_
