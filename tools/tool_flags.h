// The command-line convention of the sluice tools (sluice-shard, sluice-train), on Abseil flags
// (ABSL_FLAG in the tool's .cc file):
//
//   * a flag is spelled with dashes or underscores (--batch-size=32, --batch_size=32); its value
//     follows '=' or is the next argument (--batch-size 32); a bool flag alone means true,
//     --name=false or --noname false;
//   * --help (-h, -help) prints the usage message and the tool's main flags, --version
//     "<tool> <version> (<build type> build)"; --helpfull is Abseil's listing of every flag, with
//     source paths relative to the project (tools/sluice_train.cc);
//   * an unknown flag, a missing value or a value that does not parse is a usage error: one line
//     naming the flag as the user spells it with dashes (absl::ParseCommandLine alone would
//     print its own lines and exit 1);
//   * an argument that is not a flag, and every argument after "--", is positional;
//   * Abseil's --flagfile, --fromenv and --tryfromenv are usage errors (unbounded reads of a
//     file or the environment: docs/limits.md, "Bounds on flags"), and --helpfull omits them.
//
// Exit codes of the tools: 0 ok, 1 data or runtime error, 2 usage error.
//
// Abseil flags are process-global: one tool per binary, its command line parsed once, on the
// main thread, before any other thread reads a flag.
#ifndef SLUICE_TOOLS_TOOL_FLAGS_H_
#define SLUICE_TOOLS_TOOL_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

struct ToolDescription {
  std::string name;   // "sluice-train": the program, first word of --help and --version
  std::string usage;  // what --help and --helpfull print after "<name>: "
  // The tool's own flags are those defined in a source file whose path contains this
  // ("sluice_train"); Abseil's --helpshort lists them.
  std::string source_name;
  // The flags --help lists with their help text and default, underscore spelling.
  std::vector<std::string> main_flags;
};

struct ToolCommandLine {
  // --help, --helpshort, --helpfull or --version was given and its text is printed: the tool
  // exits 0.
  bool help_printed = false;
  std::vector<std::string> args;        // argv as the user typed it, argv[0] first
  std::vector<std::string> positional;  // the arguments that are not flags, without argv[0]
  std::vector<std::string> flags;       // the flags given, underscore spelling, in order
};

// Parses argv into the process's Abseil flags after checking every flag's spelling and value.
// Prints --help, --helpshort, --helpfull and --version output on stdout (help_printed; the
// tool exits 0); Abseil's rarer help flags (--helpon, --helpmatch) print and exit 1 inside
// absl::ParseCommandLine. A switch followed by a separate "true"/"false" is an error naming
// the form to use. Errors: kInvalidArgument, a usage error whose
// message is one line ("unknown flag --no-such-flag (...)", "--epochs: Illegal value ...").
absl::StatusOr<ToolCommandLine> ParseToolCommandLine(const ToolDescription& tool, int argc,
                                                     char** argv);

// The --help text: "<name>: <usage>", the main flags, and where the rest is.
void PrintToolHelp(const ToolDescription& tool);

// "batch-size" for "batch_size": messages name a flag with dashes, as users type it.
std::string DashedFlagName(const std::string& name);

}  // namespace sluice

#endif  // SLUICE_TOOLS_TOOL_FLAGS_H_
