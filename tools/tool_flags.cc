#include "tools/tool_flags.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "common/printable.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

std::string VersionLine(const std::string& tool_name) {
  return absl::StrCat(tool_name, " ", SLUICE_VERSION, " (", SLUICE_BUILD_TYPE, " build)\n");
}

// Help paths print "tools/sluice_train.cc", not the build machine's source path.
std::string NormalizeFilename(absl::string_view path) {
  for (const char* root : {"tools/", "absl/"}) {
    const size_t at = path.rfind(root);
    if (at != absl::string_view::npos) return std::string(path.substr(at));
  }
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

// What Abseil's own help flags (--helpfull, --helpshort, ...) print.
void ConfigureAbseilUsage(const ToolDescription& tool) {
  absl::SetProgramUsageMessage(tool.usage);
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [source_name = tool.source_name](absl::string_view path) {
    return absl::StrContains(path, source_name);
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = NormalizeFilename;
  usage.version_string = [name = tool.name] { return VersionLine(name); };
  absl::SetFlagsUsageConfig(usage);
}

// Abseil spells flags with underscores; the dashed spelling users type (--batch-size=32) is
// accepted by rewriting the name part of each --flag (not its value, not after "--").
std::vector<std::string> WithUnderscoreNames(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    for (size_t k = 2; k < end; ++k) {
      if (a[k] == '-') a[k] = '_';
    }
  }
  return args;
}

// Flag names absl handles itself.
bool IsBuiltinFlag(absl::string_view name) {
  for (const char* b :
       {"help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "version",
        "only_check_args", "flagfile", "fromenv", "tryfromenv", "undefok"}) {
    if (name == b) return true;
  }
  return false;
}

// Abseil's flags that read more arguments from a file or the environment. Refused before
// Abseil parses (docs/limits.md, "Bounds on flags"): absl reads a --flagfile whole, with no bound
// on its size or on nesting, so --flagfile=/dev/zero or a file that includes itself grew memory
// until the process was killed; a missing one exited 1, not as a usage error. The docs never
// offered them.
bool IsRefusedBuiltinFlag(absl::string_view name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv";
}

// Abseil's parse error quotes the value whole ("Illegal value '...' specified for flag ..."):
// a value that is long or holds control characters is echoed escaped and cut instead.
std::string ValueError(const std::string& error, absl::string_view value) {
  const std::string shown = Printable(value);
  if (value.empty() || shown == value) return error;
  return absl::StrReplaceAll(error, {{value, shown}});
}

// absl::ParseCommandLine exits 1 on an unknown flag or a bad value; usage errors are exit code
// 2 in the tools, so each --flag[=value] of `args` (underscore names) is checked first. The
// names of the flags given are appended to `given`.
absl::Status CheckFlagSyntax(const std::vector<std::string>& args,
                             std::vector<std::string>* given) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    const absl::string_view body = absl::string_view(a).substr(a[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    if (IsRefusedBuiltinFlag(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name,
                       " is not supported by the sluice tools: write the flags on the command "
                       "line (a shell script or a shell array can hold them)"));
    }
    if (IsBuiltinFlag(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
      if (positive != nullptr && positive->IsOfType<bool>() && eq == absl::string_view::npos) {
        given->push_back(std::string(name.substr(2)));
        continue;
      }
    }
    const std::string dashed = DashedFlagName(std::string(name));
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", Printable(dashed), " (--help lists the main flags, --helpfull all)"));
    }
    given->push_back(std::string(name));
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(body.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      if (i + 1 < args.size() && (args[i + 1] == "true" || args[i + 1] == "false")) {
        return absl::InvalidArgumentError(absl::StrCat("--", dashed, " is a switch: write --",
                                                       dashed, " or --", dashed, "=", args[i + 1],
                                                       ", not a separate \"", args[i + 1], "\""));
      }
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", dashed, ": missing a value"));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--", dashed, ": ", ValueError(error, value)));
    }
  }
  return absl::OkStatus();
}

// Every flag whose (normalized) source file contains `source_filter` ("" for all), grouped by
// file, sorted by name: Abseil's --helpfull prints the same list but exits 1, and asking for
// help is not a failure.
void PrintAllFlags(const ToolDescription& tool, absl::string_view source_filter) {
  std::map<std::string, std::map<std::string, const absl::CommandLineFlag*>> by_file;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file = NormalizeFilename(flag->Filename());
    if (!absl::StrContains(file, source_filter) || IsRefusedBuiltinFlag(name)) continue;
    by_file[file][std::string(name)] = flag;
  }
  std::printf("%s: %s\n", tool.name.c_str(), tool.usage.c_str());
  for (const auto& [file, flags] : by_file) {
    std::printf("\n  Flags from %s:\n", file.c_str());
    for (const auto& [name, flag] : flags) {
      std::printf("    --%s (%s); default: \"%s\";\n", DashedFlagName(name).c_str(),
                  flag->Help().c_str(), flag->DefaultValue().c_str());
    }
  }
}

// --help, -help, -h, --helpshort, --helpfull or --version before any "--": its output is
// printed and true returned.
bool PrintHelpOrVersion(const ToolDescription& tool, const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--help" || args[i] == "-help" || args[i] == "-h") {
      PrintToolHelp(tool);
      return true;
    }
    if (args[i] == "--helpfull" || args[i] == "-helpfull") {
      PrintAllFlags(tool, "");
      return true;
    }
    if (args[i] == "--helpshort" || args[i] == "-helpshort") {
      PrintAllFlags(tool, tool.source_name);
      return true;
    }
    if (args[i] == "--version" || args[i] == "-version") {
      std::fputs(VersionLine(tool.name).c_str(), stdout);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string DashedFlagName(const std::string& name) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed;
}

void PrintToolHelp(const ToolDescription& tool) {
  // The spelling note shows a main flag whose name has two words.
  auto example = std::find_if(tool.main_flags.begin(), tool.main_flags.end(),
                              [](const std::string& f) { return absl::StrContains(f, '_'); });
  std::printf("%s: %s\n\nmain flags", tool.name.c_str(), tool.usage.c_str());
  if (example != tool.main_flags.end()) {
    std::printf(" (spelled --%s or --%s)", DashedFlagName(*example).c_str(), example->c_str());
  }
  std::printf(":\n");
  for (const std::string& name : tool.main_flags) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f == nullptr) continue;
    std::printf("  --%s  %s (default: \"%s\")\n", DashedFlagName(name).c_str(), f->Help().c_str(),
                f->DefaultValue().c_str());
  }
  std::printf("\n--helpfull lists every flag; --version prints the version.\n");
}

absl::StatusOr<ToolCommandLine> ParseToolCommandLine(const ToolDescription& tool, int argc,
                                                     char** argv) {
  ConfigureAbseilUsage(tool);
  ToolCommandLine command_line;
  command_line.args.assign(argv, argv + argc);
  std::vector<std::string> args = WithUnderscoreNames(command_line.args);
  if (PrintHelpOrVersion(tool, args)) {
    command_line.help_printed = true;
    return command_line;
  }
  RETURN_IF_ERROR(CheckFlagSyntax(args, &command_line.flags));
  std::vector<char*> abseil_argv;
  for (std::string& a : args) abseil_argv.push_back(a.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(abseil_argv.size()), abseil_argv.data());
  command_line.positional.assign(positional.begin() + 1, positional.end());
  return command_line;
}

}  // namespace sluice
