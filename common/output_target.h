// The start-up checks of the paths a tool writes (docs/limits.md, "Files sluice writes"), run
// before any work so that a run never trains or shards and then cannot write its result, and
// never blocks on an output:
//
//   target                        ProbeOutputFile                 ProbeOutputDirectory
//   absent                        PATH.tmp created and removed    nearest existing parent is
//                                 (its directory must exist)      a writable directory
//   regular file                  the same                        refused (not a directory)
//   directory                     refused                         writable
//   FIFO                          opened without waiting: no      refused
//                                 reader is refused; with one,
//                                 held open until exit
//   character device (/dev/null,  access(W_OK), then opened       refused
//   a terminal)                   without waiting and closed
//                                 (/dev/tty without a controlling
//                                 terminal is refused)
//   a link under /dev/ or /proc/  access(W_OK), never opened      refused
//   (/dev/stdout)
//   socket, block device          refused                         refused
//
// A FIFO probe keeps its descriptor open for the rest of the process: closing it would end a
// one-shot reader's input (`cat fifo` exits at the first writer's close), and the reader would
// be gone when the output is written. The write itself opens the FIFO again without waiting
// (Env::NewAppendableFile), so a reader that left meanwhile is an error, not a hang.
//
// Errors: kInvalidArgument (kFailedPrecondition for a FIFO without a reader), one line naming
// the flag and the path (escaped, common/printable.h) and what was expected, e.g.
// "--report-html out/r.fifo: a FIFO that no process is reading (start its reader first)".
// Thread safety: call from one thread at start-up.
#ifndef SLUICE_COMMON_OUTPUT_TARGET_H_
#define SLUICE_COMMON_OUTPUT_TARGET_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace sluice {

// An output file named by `--flag` (flag without dashes, e.g. "report-json").
absl::Status ProbeOutputFile(Env* env, const std::string& path, absl::string_view flag);

// An output directory named by `--flag` (sluice-shard create --out, --checkpoint-dir).
absl::Status ProbeOutputDirectory(const std::string& path, absl::string_view flag);

}  // namespace sluice

#endif  // SLUICE_COMMON_OUTPUT_TARGET_H_
