// sluice-train: trains an MLP from a shard dataset (or IDX files) through the sluice pipeline,
// on the GPU when there is one and on the CPU otherwise, and ends with the bottleneck report.
// This file runs the job and prints; the flags and the job options they make are in
// tools/sluice_train.cc.
//
//   sluice-train --data DIR [--test-data DIR] [--epochs 10] [--batch-size 32] [--lr 0.01] ...
//   sluice-train --helpfull lists every flag.
//
// Exit codes: 0 success, 1 runtime/data error (missing or corrupt data, CUDA unavailable, out
// of memory, I/O), 2 usage error (bad flag values). Only main() turns a Status into an exit code.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/limits.h"
#include "common/output_target.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "engine/dist/communicator.h"
#include "engine/job/advice_check.h"
#include "engine/job/advice_rerun.h"
#include "engine/job/job_report.h"
#include "engine/job/outputs.h"
#include "engine/job/train_job.h"
#include "engine/job/what_if.h"
#include "nlohmann/json.hpp"
#include "pipeline/stage_stats.h"
#include "report/advice/advice.h"
#include "report/analysis/bottleneck_report.h"
#include "report/decide/decide.h"
#include "report/render/html.h"
#include "report/stages.h"
#include "storage/remote/http_client.h"
#include "storage/remote/remote_env.h"
#include "tools/sluice_train_flags.h"
#include "tools/stdout_output.h"
#include "tools/tool_flags.h"

namespace sluice {
namespace {

// What a what-if run trained on: some make a stage free by replaying data, so the accuracy the
// run printed says nothing about the model; say so next to it.
const char* WhatIfTrainingNote(Stage what_if, bool compute_free) {
  if (compute_free) return ": compute did no work, so nothing was trained";
  switch (what_if) {
    case Stage::kPreprocess:
      return ": every batch was a replay of one of the first batches, so the model saw almost "
             "none of the data and the accuracy above means nothing; compare only the rate "
             "(--what-if=all puts it beside a normal run)";
    case Stage::kTransforms:
      return ": every sample was a replay of one of the chain's first outputs with another "
             "record's label, so the accuracy above means nothing; compare only the rate "
             "(--what-if=all puts it beside a normal run)";
    case Stage::kDecode:
      return ": every sample's image was one of the first records' decoded images with its own "
             "record's label, so the accuracy above means nothing; compare only the rate "
             "(--what-if=all puts it beside a normal run)";
    case Stage::kH2D:
      return ": no batch was copied, each step trained on what its device slot held from an "
             "earlier batch, so the accuracy above means nothing; compare only the rate";
    default:
      return " (the same data, served from memory: the training itself is unchanged)";
  }
}

// Text made of lines, each made safe for the terminal (TerminalSafe): the report's text, whose
// notes may quote a record's source file.
std::string SafeLines(absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) lines.push_back(TerminalSafe(line));
  return absl::StrJoin(lines, "\n");
}

void PrintSkipped(const char* split, uint64_t frames, uint64_t records,
                  const std::vector<std::string>& messages) {
  const std::string first_message = messages.empty() ? "-" : TerminalSafe(messages.front());
  const char* first = first_message.c_str();
  if (frames == 0 && records > 0) {  // records a chain refused (corrupt images), in whole frames
    std::printf("skipped in the %s split: %llu corrupt records; first: %s\n", split,
                static_cast<unsigned long long>(records), first);
    return;
  }
  if (frames == 0) return;
  std::printf("skipped in the %s split: %llu corrupt frames (%llu records); first: %s\n", split,
              static_cast<unsigned long long>(frames), static_cast<unsigned long long>(records),
              first);
}

// A live line on a terminal, plain lines otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}
  void Step(const TrainProgress& p) {
    if (quiet_) return;
    std::string line =
        absl::StrFormat("epoch %d step %d/%d  loss %.4f  %.0f samples/s  lr %.3g", p.epoch + 1,
                        p.step_in_epoch, p.batches_per_epoch, p.loss, p.samples_per_second, p.lr);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else if (p.optimizer_steps % (plain_every_ * 1) == 0) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  void Epoch(const EpochSummary& s) {
    if (tty_ && !quiet_) std::fprintf(stderr, "\r\033[K");
    if (StdoutReaderGone()) return;  // `| head` has what it wanted; training goes on
    std::string line = absl::StrFormat(
        "epoch %d: train loss %.4f, train accuracy %.4f, %.0f samples/s, %.2fs", s.epoch + 1,
        s.train_loss, s.train_accuracy, s.samples_per_second, s.seconds);
    if (s.test) {
      absl::StrAppendFormat(&line, "; test loss %.4f, test accuracy %.4f",
                            s.test->samples ? s.test->loss_sum / s.test->samples : 0.0,
                            s.test->accuracy());
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  void set_plain_every(int64_t steps) { plain_every_ = steps > 0 ? steps : 1; }

 private:
  bool quiet_;
  bool tty_;
  int64_t plain_every_ = 1;
};

// SIGINT / SIGTERM: the handler only records the signal and sets the flag the Trainer polls
// between steps; SA_RESETHAND restores the default action, so a second signal ends the process
// at once.
std::atomic<bool> g_stop_requested{false};
volatile std::sig_atomic_t g_stop_signal = 0;
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void OnStopSignal(int sig) {
  g_stop_signal = sig;
  g_stop_requested.store(true, std::memory_order_relaxed);
  EndInjectedDelays();  // a delay of hours (--inject-delay) must not hold the stop
  static const char kMessage[] =
      "\nsluice-train: stopping after the current step (signal again to abort at once)\n";
  // write(2) is async-signal-safe; its result does not matter here.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// The command line that resumes this run: the same arguments, --resume replaced. An argument
// with a control character (an ANSI escape in a path) is written in bash's $'...' form, every
// byte outside printable ASCII as \xNN, so the line pastes back as the same argument and
// nothing reaches the terminal raw.
std::string ResumeCommand(const std::vector<std::string>& argv, const std::string& checkpoint) {
  auto quote = [](const std::string& a) {
    if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-+=.,/:@%") == std::string::npos) {
      return a;
    }
    if (TerminalSafe(a, a.size() + 1) != a) {  // control, invisible or invalid characters
      std::string q = "$'";
      for (char c : a) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7F) {
          absl::StrAppendFormat(&q, "\\x%02x", u);
        } else {
          if (c == '\'' || c == '\\') q += '\\';
          q += c;
        }
      }
      return q + "'";
    }
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--resume" || a == "-resume") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--resume=", 0) == 0 || a.rfind("-resume=", 0) == 0) continue;
    out.push_back(quote(a));
  }
  out.push_back(quote("--resume=" + checkpoint));
  return absl::StrJoin(out, " ");
}

// The callbacks that print progress, epochs, autotune decisions and --report-every reports.
void AddPrinters(TrainJobOptions& options, ProgressPrinter& printer, bool rank_zero) {
  const int64_t every = absl::GetFlag(FLAGS_progress_every);
  // On a terminal the live line is redrawn every `every` steps; in logs, a plain line every
  // 10x that many.
  printer.set_plain_every(every * 10);
  options.progress_every_steps = every;
  options.on_progress = [&printer](const TrainProgress& p) { printer.Step(p); };
  if (rank_zero) options.on_epoch_end = [&printer](const EpochSummary& s) { printer.Epoch(s); };
  if (rank_zero) {
    options.on_notice = [](const std::string& line) {
      std::fprintf(stderr, "sluice-train: warning: %s\n", TerminalSafe(line).c_str());
    };
  }
  options.on_autotune = [](const std::vector<std::string>& reasons) {
    for (const std::string& r : reasons) std::printf("autotune: %s\n", r.c_str());
    std::fflush(stdout);
  };
  if (options.report_every_steps > 0) {
    options.on_report = [](const RunRecord& partial) {
      BottleneckReport r = AnalyzeRun(partial, nullptr, UsableCores());
      std::fprintf(stderr, "\r\033[Kreport after %d steps: %.0f samples/s; %s\n",
                   static_cast<int>(partial.compute.steps), r.measured_samples_per_s,
                   r.sentence.c_str());
    };
  }
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

// `own_signal`: the signal this process got (0: none); `job_signal`: the one that stopped the
// job (another rank's when this one got none).
void PrintInterrupted(const TrainJobResult& result, int own_signal, int job_signal,
                      const std::vector<std::string>& argv) {
  const TrainResult& t = result.train;
  std::fflush(stdout);
  const std::string cause =
      own_signal != 0
          ? absl::StrCat("interrupted by ", SignalName(own_signal))
          : absl::StrCat("interrupted: another rank was stopped by ", SignalName(job_signal));
  std::fprintf(stderr,
               "\r\033[Ksluice-train: %s after epoch %llu step %llu "
               "(%lld optimizer steps)\n",
               cause.c_str(), static_cast<unsigned long long>(t.stopped_epoch + 1),
               static_cast<unsigned long long>(t.stopped_step),
               static_cast<long long>(t.optimizer_steps));
  if (!result.checkpoint_path.empty()) {
    std::fprintf(stderr, "sluice-train: checkpoint written: %s\nresume with: %s\n",
                 Printable(result.checkpoint_path).c_str(),
                 ResumeCommand(argv, result.checkpoint_path).c_str());
  } else {
    std::fprintf(stderr,
                 "sluice-train: no checkpoint was written (no --checkpoint-dir); "
                 "this run cannot be resumed\n");
  }
}

// The lines after training: samples and rate, resume point, accuracy, skipped frames, and the
// files written.
void PrintRunSummary(const TrainJobOptions& options, const TrainJobResult& result,
                     dist::Communicator* world) {
  const TrainResult& t = result.train;
  if (world->is_distributed()) {
    // Every rank trained its slice: the job's samples are the sums over the ranks, an epoch a
    // stop cut short included (TrainResult::samples is this rank's).
    const int64_t job_samples = t.job_samples;
    std::printf(
        "\nsluice-train: %d ranks (%s), %lld samples in %.2fs of training (%.0f "
        "samples/s over all ranks); rank 0 trained %lld on %s\n",
        world->size(), world->description().c_str(), static_cast<long long>(job_samples),
        t.train_seconds, t.train_seconds > 0 ? job_samples / t.train_seconds : 0.0,
        static_cast<long long>(t.samples), result.run.device.c_str());
  } else {
    std::printf(
        "\nsluice-train: %s, %lld samples in %.2fs of training (%.0f samples/s); "
        "%.2fs with evaluation (the process also opens the data and measures ceilings)\n",
        result.run.device.c_str(), static_cast<long long>(t.samples), t.train_seconds,
        TrainSamplesPerSecond(t), t.seconds);
  }
  if (result.resumed) {
    std::printf("resumed at epoch %llu step %llu (%llu samples trained before)\n",
                static_cast<unsigned long long>(result.resumed_epoch + 1),
                static_cast<unsigned long long>(result.resumed_step),
                static_cast<unsigned long long>(result.resumed_samples));
  }
  if (!t.epochs.empty() && t.epochs.back().test) {
    std::printf("final test accuracy: %.4f (%lld samples)\n", t.epochs.back().test->accuracy(),
                static_cast<long long>(t.epochs.back().test->samples));
  }
  if (!result.not_evaluated.empty()) {
    std::printf("nothing was evaluated: %s\n", TerminalSafe(result.not_evaluated).c_str());
  }
  PrintSkipped("train", result.run.pipeline.skipped_frames, result.run.pipeline.skipped_records,
               result.run.pipeline.corrupt_frames);
  PrintSkipped("test", result.run.test_skipped_frames, result.run.test_skipped_records,
               result.run.test_corrupt_frames);
  if (options.pipeline.diagnostics.what_if || options.compute_free) {
    const Stage free = options.pipeline.diagnostics.what_if.value_or(Stage::kCompute);
    std::printf("what-if: %s was free in this run%s\n", std::string(StageName(free)).c_str(),
                WhatIfTrainingNote(free, options.compute_free));
  }
  if (!result.checkpoint_path.empty()) {
    if (Env::Default()->FileExists(result.checkpoint_path)) {
      std::printf("checkpoint: %s\n", Printable(result.checkpoint_path).c_str());
    } else {
      // --stop-after-steps ends as if the process were killed: only the checkpoints written
      // during the run (--checkpoint-every) exist.
      std::printf(
          "checkpoint: none written in %s (--stop-after-steps stops as if killed; "
          "--checkpoint-every=N writes them during the run)\n",
          Printable(DirName(result.checkpoint_path)).c_str());
    }
  }
  if (!options.export_safetensors.empty()) {
    std::printf("safetensors: %s\n", ShownOutputPath(options.export_safetensors).c_str());
  }
}

// --what-if=all: the normal run, then each stage made free in turn. The table decides the
// verdict where the two disagree (Decide with the rows as evidence), so it runs before the
// report is printed.
absl::StatusOr<std::vector<WhatIfRow>> RunWhatIfAndReconcile(Env* env,
                                                             const TrainJobOptions& options,
                                                             const TrainJobResult& normal,
                                                             BottleneckReport* report) {
  ASSIGN_OR_RETURN(
      std::vector<WhatIfRow> rows, RunWhatIfTable(env, options, normal, [](Stage stage) {
        std::fprintf(stderr, "what-if: %s free ...\n", std::string(StageName(stage)).c_str());
      }));
  ApplyVerdict(Decide({.analysis = report, .run = &normal.run, .what_if = &rows}), report);
  return rows;
}

// The what-if table; its rows are kept for the HTML report.
void PrintWhatIfTable(const std::vector<WhatIfRow>& rows, const BottleneckReport& report) {
  std::printf(
      "\nwhat-if (each stage made free in turn; the stage whose removal speeds the run "
      "up most is the limit):\n");
  std::printf("  %-12s %14s %9s\n", "free stage", "samples/s", "speedup");
  for (const WhatIfRow& row : rows) {
    const std::string name = WhatIfRowName(row);
    if (!row.note.empty()) {
      std::printf("  %-12s %14s %9s  %s\n", name.c_str(), "-", "-", row.note.c_str());
    } else {
      std::printf("  %-12s %14.0f %8.2fx\n", name.c_str(), row.samples_per_s, row.speedup);
    }
  }
  std::printf("  report verdict for the normal run: %s\n", report.sentence.c_str());
}

// --check-advice: each suggestion of the report run as an experiment over a bounded span, its
// text printed; the checks also go into the JSON (`advice_check`).
absl::StatusOr<std::vector<AdviceCheck>> RunAdviceChecks(Env* env, const TrainJobOptions& options,
                                                         const TrainJobResult& result,
                                                         const BottleneckReport& report,
                                                         int64_t* steps) {
  *steps = 0;
  if (report.advice.empty()) {
    std::fputs(AdviceChecksText({}, Consumer::kTrainJob, 0, 0).c_str(), stdout);
    return std::vector<AdviceCheck>{};
  }
  // Half an epoch or 400 steps, whichever is fewer (at least 50): long enough to pass the
  // pipeline's start-up, short enough to run each change twice.
  const int64_t epoch_steps = result.train.epochs.empty()
                                  ? 400
                                  : static_cast<int64_t>(result.train.epochs.front().train_samples /
                                                         options.pipeline.order.batch_size);
  *steps = std::max<int64_t>(50, std::min<int64_t>(400, epoch_steps / 2));
  ASSIGN_OR_RETURN(
      std::vector<AdviceCheck> checks,
      CheckAdvice(env, options, report.advice, *steps, /*rounds=*/2, [](const std::string& label) {
        std::fprintf(stderr, "check-advice: %s ...\n", label.c_str());
      }));
  std::fputs(AdviceChecksText(checks, Consumer::kTrainJob, *steps, /*rounds=*/2).c_str(), stdout);
  return checks;
}

// The JSON report's measured additions (docs/report-schema.md): the what-if table
// (--what-if=all) and the advice checks (--check-advice), present only when they ran.
void AddMeasuredToJson(const std::vector<WhatIfRow>& what_if,
                       const std::optional<std::vector<AdviceCheck>>& checks, int64_t steps,
                       nlohmann::ordered_json* json) {
  if (!what_if.empty()) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const WhatIfRow& r : what_if) {
      rows.push_back({{"stage", WhatIfRowName(r)},
                      {"samples_per_s", r.samples_per_s},
                      {"speedup", r.speedup},
                      {"note", r.note}});
    }
    (*json)["what_if"] = std::move(rows);
  }
  if (checks) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const AdviceCheck& c : *checks) {
      rows.push_back(AdviceCheckJson(c, Consumer::kTrainJob, steps));
    }
    (*json)["advice_check"] = std::move(rows);
  }
}

// A failed write of output --`flag` after training, naming the flag ("/dev/full: write failed"
// alone did not say which output it was).
absl::Status AfterTraining(absl::string_view flag, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("--", flag, ": ", s.message(), " (written after training)"));
}

// Rank 0, after training: the summary, the report (text, JSON), the trace and the what-if table.
absl::Status PrintAndWriteReport(Env* env, const TrainJobOptions& options,
                                 const TrainJobResult& result, const JobReport& job_report,
                                 dist::Communicator* world) {
  PrintRunSummary(options, result, world);
  if (!job_report.ceilings_note.empty()) {
    std::fprintf(stderr, "sluice-train: ceilings not measured: %s\n",
                 job_report.ceilings_note.c_str());
  }
  BottleneckReport report = job_report.report;
  std::vector<WhatIfRow> what_if_rows;
  const bool what_if_all = absl::GetFlag(FLAGS_what_if) == "all" && !result.train.interrupted;
  if (what_if_all) {
    ASSIGN_OR_RETURN(what_if_rows, RunWhatIfAndReconcile(env, options, result, &report));
  }
  if (absl::GetFlag(FLAGS_report)) std::printf("\n%s", SafeLines(report.ToText()).c_str());
  std::optional<std::vector<AdviceCheck>> checks;
  int64_t check_steps = 0;
  if (absl::GetFlag(FLAGS_check_advice) && !result.train.interrupted) {
    std::fflush(stdout);
    ASSIGN_OR_RETURN(checks, RunAdviceChecks(env, options, result, report, &check_steps));
  }
  // One output that cannot be written (stdout's reader gone, a full disk) does not cost the
  // others: each is written, and the first failure is returned after the last.
  absl::Status first_failure;
  auto note = [&first_failure](const absl::Status& s) {
    if (first_failure.ok()) first_failure = s;
    return s.ok();
  };
  if (const std::string path = absl::GetFlag(FLAGS_report_json); !path.empty()) {
    nlohmann::ordered_json json = report.ToJson();
    AddMeasuredToJson(what_if_rows, checks, check_steps, &json);
    note(AfterTraining("report-json", WriteFileAtomically(env, path, json.dump(2) + "\n")));
  }
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty()) {
    if (note(AfterTraining("trace", WriteJobTrace(env, path, result, job_report)))) {
      std::printf("trace: %s (open in ui.perfetto.dev or chrome://tracing)\n",
                  ShownOutputPath(path).c_str());
    }
  }
  std::fflush(stdout);
  HtmlExtras extras = HtmlExtrasFromRun(result.run);
  if (what_if_all) PrintWhatIfTable(what_if_rows, report);
  extras.what_if = what_if_rows;
  // Last: the page holds the what-if table.
  if (const std::string path = absl::GetFlag(FLAGS_report_html); !path.empty()) {
    if (note(AfterTraining("report-html",
                           WriteFileAtomically(env, path, ReportToHtml(report, extras))))) {
      std::printf("report: %s (open in a browser)\n", ShownOutputPath(path).c_str());
    }
  }
  return first_failure;
}

// Runs the job; the exit code is 0, or 128 + the signal that stopped it.
absl::StatusOr<int> Run(TrainJobOptions options, const std::vector<std::string>& argv,
                        dist::Communicator* world) {
  InstallStopHandlers();
  options.stop_requested = &g_stop_requested;
  remote::HttpClient::SetStopFlag(&g_stop_requested);  // a stop ends requests in flight
  options.comm = world;
  // In a data-parallel run rank 0 speaks for the job; the others print only their errors.
  const bool rank_zero = world->rank() == 0;
  ProgressPrinter printer(absl::GetFlag(FLAGS_quiet) || !rank_zero);
  AddPrinters(options, printer, rank_zero);
  // Datasets may be URLs (docs/storage.md); every other path is a local file.
  Env* env = remote::UrlEnv();
  // Every output is checked before any work (the job checks its own again before training):
  // a run never trains and then cannot write, nor waits on a FIFO without a reader. Rank 0
  // alone writes the report and the trace, so it alone probes them (ranks probing one path at
  // once would race on the probe file).
  RETURN_IF_ERROR(CheckOutputsAreNotInputs({{"report-json", absl::GetFlag(FLAGS_report_json)},
                                            {"report-html", absl::GetFlag(FLAGS_report_html)},
                                            {"trace", absl::GetFlag(FLAGS_trace)}},
                                           options));
  if (const std::string path = absl::GetFlag(FLAGS_report_json); !path.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, path, "report-json"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_report_html); !path.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, path, "report-html"));
  }
  if (const std::string path = absl::GetFlag(FLAGS_trace); !path.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeWritable(env, path, "trace"));
  }
  if (!options.checkpoint_dir.empty() && rank_zero) {
    RETURN_IF_ERROR(ProbeOutputDirectory(options.checkpoint_dir, "checkpoint-dir"));
  }
  RETURN_IF_ERROR(ProbeJobOutputs(env, options));
  ASSIGN_OR_RETURN(TrainJobResult result, RunTrainJob(env, options));
  const int own_signal = g_stop_signal;
  // The ranks stop together (the trainer agrees on it), but only the rank that got the signal
  // knows which: every rank reports and exits with the job's signal.
  double job_signal = own_signal;
  if (world->is_distributed()) RETURN_IF_ERROR(world->AllReduceMax(&job_signal, 1));
  const int stop_signal = static_cast<int>(job_signal);
  JobReportSettings settings;
  settings.ceilings = absl::GetFlag(FLAGS_ceilings);
  settings.refresh_ceilings = absl::GetFlag(FLAGS_refresh_ceilings);
  settings.gather_traces = !absl::GetFlag(FLAGS_trace).empty();
  ASSIGN_OR_RETURN(JobReport job_report, ReportJob(env, options, result, settings));
  if (!rank_zero) return stop_signal != 0 ? 128 + stop_signal : 0;
  if (result.train.interrupted) PrintInterrupted(result, own_signal, stop_signal, argv);
  RETURN_IF_ERROR(PrintAndWriteReport(env, options, result, job_report, world));
  return stop_signal != 0 ? 128 + stop_signal : 0;
}

// What --help says; --helpfull lists every flag.
ToolDescription TrainTool() {
  return {.name = "sluice-train",
          .usage =
              "trains an MLP from a sluice shard dataset.\n"
              "  sluice-train --data DIR [--epochs 10] [--batch-size 32] [--lr 0.01] "
              "[--device auto]\n"
              "Exit codes: 0 ok, 1 runtime or data error, 2 usage error, 130/143 stopped by "
              "SIGINT/SIGTERM.",
          .source_name = "sluice_train",
          .main_flags = {"data",
                         "test_data",
                         "epochs",
                         "batch_size",
                         "lr",
                         "optimizer",
                         "layers",
                         "device",
                         "threads",
                         "shuffle",
                         "transforms",
                         "normalize_mean",
                         "normalize_std",
                         "h2d_format",
                         "checkpoint_dir",
                         "checkpoint_every",
                         "resume",
                         "metrics_out",
                         "export_safetensors",
                         "report_json",
                         "report_html",
                         "trace",
                         "what_if",
                         "quiet"}};
}

// The flag that runs the job again after it (on rank 0 alone, which the other ranks of a
// data-parallel job would wait for forever), or null.
const char* RerunFlag() {
  if (absl::GetFlag(FLAGS_what_if) == "all") return "--what-if=all";
  if (absl::GetFlag(FLAGS_check_advice)) return "--check-advice";
  return nullptr;
}

// Every error line goes through TerminalSafe: a path that a library quoted unescaped cannot
// reach the terminal as an escape sequence, nor run to megabytes.
int ReportUsageError(absl::string_view message) {
  std::fprintf(stderr, "sluice-train: %s\n", TerminalSafe(message).c_str());
  return 2;
}

// `code`, or 1 with one line on stderr when what was printed on stdout did not all reach it.
int ExitAfterStdout(int code, bool reader_gone_ok) {
  const absl::Status s = FinishStdout(reader_gone_ok);
  if (s.ok() || code != 0) return code;
  std::fprintf(stderr, "sluice-train: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolCommandLine> command_line = ParseToolCommandLine(TrainTool(), argc, argv);
  if (!command_line.ok()) return ReportUsageError(command_line.status().message());
  if (command_line->help_printed) return ExitAfterStdout(0, /*reader_gone_ok=*/false);
  if (!command_line->positional.empty()) {
    return ReportUsageError(absl::StrCat("unexpected argument ",
                                         QuotedPrintable(command_line->positional[0]),
                                         " (flags are --name=value)"));
  }
  auto options = OptionsFromFlags();
  if (!options.ok()) return ReportUsageError(options.status().message());
  // An output on stdout ("-", /dev/stdout) is alone there: the rest goes to stderr.
  std::string report_json = absl::GetFlag(FLAGS_report_json);
  std::string report_html = absl::GetFlag(FLAGS_report_html);
  std::string trace = absl::GetFlag(FLAGS_trace);
  if (absl::Status routed =
          RouteStdoutOutputs({{"report-json", &report_json},
                              {"report-html", &report_html},
                              {"trace", &trace},
                              {"metrics-out", &options->metrics_out},
                              {"export-safetensors", &options->export_safetensors}});
      !routed.ok()) {
    return ReportUsageError(routed.message());
  }
  absl::SetFlag(&FLAGS_report_json, report_json);
  absl::SetFlag(&FLAGS_report_html, report_html);
  absl::SetFlag(&FLAGS_trace, trace);
  // Under mpirun/srun: join the job's world (a single process otherwise).
  dist::SetWatchdogProgramName("sluice-train");
  dist::SetCollectiveTimeoutSeconds(absl::GetFlag(FLAGS_collective_timeout_s));
  absl::StatusOr<std::unique_ptr<dist::Communicator>> world = dist::InitWorld(nullptr, nullptr);
  if (!world.ok()) {
    std::fprintf(stderr, "sluice-train: %s\n", TerminalSafe(world.status().message()).c_str());
    return 1;
  }
  if (const char* flag = RerunFlag(); flag != nullptr && (*world)->is_distributed()) {
    // Every rank refuses; rank 0 says why before MPI_Finalize (which no rank leaves before all
    // have entered it), so the line is out before any rank exits and mpirun ends the others.
    int code = 2;
    if ((*world)->rank() == 0) {
      code = ReportUsageError(
          absl::StrCat(flag, " runs the job again on rank 0 alone: run it in a single process"));
    }
    world->reset();
    return code;
  }
  absl::StatusOr<int> exit_code = Run(*std::move(options), command_line->args, world->get());
  if (!exit_code.ok()) {
    std::fflush(stdout);
    if ((*world)->is_distributed()) {
      // One rank's error ends the whole job at once: the others would wait for it forever in
      // the next exchange. MPI_Abort makes the launcher stop every rank (exit code 1).
      std::fprintf(stderr, "sluice-train: rank %d of %d: %s\n", (*world)->rank(), (*world)->size(),
                   TerminalSafe(exit_code.status().message()).c_str());
      std::fflush(nullptr);
      (*world)->Abort(1);
    }
    std::fprintf(stderr, "sluice-train: %s\n", TerminalSafe(exit_code.status().message()).c_str());
    return 1;
  }
  world->reset();  // MPI_Finalize after every rank is done
  // Progress and the summary on stdout are not outputs the user asked for: a reader that left
  // (`| head`) is no failure, a full disk (`> /dev/full`) is, said after every file was written.
  return ExitAfterStdout(*exit_code, /*reader_gone_ok=*/true);
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // A last resort: every failure should already be a Status; an exception that still escapes
  // (bad_alloc, length_error) ends with one line and exit code 1, not std::terminate.
  sluice::IgnoreBrokenPipes();  // a closed stdout is EPIPE, not the end before the outputs
  int code = 1;
  try {
    code = sluice::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "sluice-train: error: out of memory while running (the host refused an "
                 "allocation; a smaller --layers, --batch-size or --pool-size needs less)\n");
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "sluice-train: error: %s (unexpected exception; please report it)\n",
                 sluice::TerminalSafe(e.what()).c_str());
  }
  if (code == 0) return 0;
  // A failed run leaves without the library exit handlers: OpenBLAS's joins its worker
  // threads, and under an address-space limit a worker can be stuck retrying its buffer
  // allocation forever (seen with the CUDA libraries mapped: the message printed, then a
  // hang). Everything the run wrote went through the Env and is closed; flush stdio and go.
  std::fflush(nullptr);
  std::_Exit(code);
}
