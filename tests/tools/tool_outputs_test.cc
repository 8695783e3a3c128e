// End-to-end tests of what the tools write and echo (docs/limits.md, "Files sluice writes" and
// "Echoed input"): every output path is checked at start (a FIFO without a reader, a socket, a
// file where a directory is expected), an output on stdout is alone there, and user text in a
// message is escaped and bounded. Every run goes through `timeout`, so a hang fails the test
// instead of holding CI.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/dataset_writer.h"
#include "tests/tools/learnable_records.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using Output = testing::ToolOutput;

constexpr char kEsc = '\x1b';

class ToolOutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_tool_outputs_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 1000;
    options.sharding.records_per_frame = 100;
    ASSERT_TRUE(WriteDataset(Env::Default(), dir_ + "/data", "train",
                             testing::MakeLearnableRecords(1000, 1, 40), options)
                    .ok());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }

  // sluice-train on the small split, one CPU epoch, under a 60 s timeout (exit 124 if hung).
  Output Train(const std::string& args, const std::string& redirect = "") const {
    // In a subshell: `redirect` wins over the 2>&1 RunShell adds.
    return testing::RunShell(absl::StrCat("(SLUICE_CACHE_DIR=", dir_, "/cache timeout 60 ",
                                          SLUICE_TRAIN_BIN, " --data=", dir_,
                                          "/data --evaluate=false --device=cpu --epochs=1 "
                                          "--ceilings=false ",
                                          args, " ", redirect, ")"));
  }
  Output Shard(const std::string& args) const {
    return testing::RunShell(absl::StrCat("timeout 60 ", SLUICE_SHARD_BIN, " ", args));
  }
  std::string Fifo(const std::string& name) const {
    const std::string path = dir_ + "/" + name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    return path;
  }
  std::string dir_;
};

// --report-html to a FIFO with no reader used to train and then block in open() for ever; every
// output of sluice-train now refuses such a FIFO at start, naming the flag and the path.
TEST_F(ToolOutputsTest, EveryOutputToAFifoWithoutAReaderIsRefusedAtStart) {
  for (const char* flag :
       {"report-html", "report-json", "trace", "metrics-out", "export-safetensors"}) {
    const std::string fifo = Fifo(absl::StrCat(flag, ".fifo"));
    const Output out = Train(absl::StrCat("--", flag, "=", fifo));
    EXPECT_EQ(out.exit_code, 1) << flag << "\n" << out.text;
    EXPECT_NE(out.text.find(absl::StrCat("--", flag, " ", fifo,
                                         ": a FIFO that no process is reading (start its "
                                         "reader first)")),
              std::string::npos)
        << out.text;
    EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << "trained first:\n" << out.text;
    EXPECT_LT(out.seconds, 20) << flag;
  }
}

// The probe of a FIFO with a reader holds it open, so a reader that reads to the end of its
// input still gets the whole report after training.
TEST_F(ToolOutputsTest, AFifoWithAReaderGetsTheWholeReport) {
  const std::string fifo = Fifo("report.fifo");
  std::string received;
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::thread read_all([&] {
    const auto start = std::chrono::steady_clock::now();
    bool writer_seen = false;
    char buf[4096];
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      pollfd pfd = {reader, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      const ssize_t n = ::read(reader, buf, sizeof(buf));
      if (n > 0) {
        writer_seen = true;
        received.append(buf, static_cast<size_t>(n));
      } else if (n == 0 && writer_seen) {
        break;  // every writer closed: the end of the input
      } else if (n == 0) {
        ::usleep(20000);  // no writer yet
      }
    }
    ::close(reader);
  });
  const Output out = Train(absl::StrCat("--quiet --report-json=", fifo));
  read_all.join();
  EXPECT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(nlohmann::json::accept(received)) << received.substr(0, 400);
}

// --report-html /dev/tty in a process without a controlling terminal passed the start check
// (access(2) allows it), trained, and then failed calling /dev/tty "a FIFO that no process is
// reading". A character device is now opened at start, and the refusal names the real cause.
TEST_F(ToolOutputsTest, DevTtyWithoutAControllingTerminalIsRefusedAtStartNamingTheCause) {
  if (testing::RunShell("command -v setsid").exit_code != 0) GTEST_SKIP() << "needs setsid";
  // setsid -w: a new session, without a controlling terminal, waited for.
  const Output detached = testing::RunShell(absl::StrCat(
      "(SLUICE_CACHE_DIR=", dir_, "/cache setsid -w timeout 60 ", SLUICE_TRAIN_BIN,
      " --data=", dir_,
      "/data --evaluate=false --device=cpu --epochs=1 --ceilings=false --report-html=/dev/tty "
      "< /dev/null)"));
  EXPECT_EQ(detached.exit_code, 1) << detached.text;
  EXPECT_NE(detached.text.find("--report-html /dev/tty: cannot be opened: no such device or "
                               "address (a device with nothing behind it, such as /dev/tty in a "
                               "process without a controlling terminal)"),
            std::string::npos)
      << detached.text;
  EXPECT_EQ(detached.text.find("FIFO"), std::string::npos) << detached.text;
  EXPECT_EQ(detached.text.find("epoch 1:"), std::string::npos) << "trained first:\n"
                                                               << detached.text;
}

TEST_F(ToolOutputsTest, ACheckpointDirThatIsNotADirectoryOrHoldsAFifoIsRefusedAtStart) {
  const std::string fifo = Fifo("ckpt.fifo");
  Output out = Train(absl::StrCat("--checkpoint-dir=", fifo));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--checkpoint-dir ", fifo,
                                       ": is a FIFO (expected a "
                                       "directory)")),
            std::string::npos)
      << out.text;
  ASSERT_EQ(::mkdir((dir_ + "/ckpt").c_str(), 0755), 0);
  Fifo("ckpt/checkpoint.sluice");
  out = Train(absl::StrCat("--checkpoint-dir=", dir_, "/ckpt --checkpoint-every=5"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("/ckpt/checkpoint.sluice is not a regular file"), std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << out.text;
}

TEST_F(ToolOutputsTest, ASocketOrADirectoryAsAnOutputIsRefusedNamingTheFlag) {
  Output out = Train(absl::StrCat("--report-html=", dir_));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--report-html ", dir_, ": is a directory")),
            std::string::npos)
      << out.text;
  // A socket file, bound by Python (no C++ helper here binds one).
  const std::string socket = dir_ + "/s.sock";
  ASSERT_EQ(
      std::system(absl::StrCat("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX);"
                               " s.bind('",
                               socket, "')\"")
                      .c_str()),
      0);
  out = Train(absl::StrCat("--trace=", socket));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--trace ", socket, ": is a socket")), std::string::npos)
      << out.text;
}

// `--report-json=-` (or /dev/stdout, /dev/fd/1, a pipe, the file stdout is) must give stdout
// that is exactly one JSON document, with or without --quiet: the progress, the report's text
// and the summary went to stdout too.
TEST_F(ToolOutputsTest, ReportJsonOnStdoutIsTheOnlyThingOnStdout) {
  const std::string json = dir_ + "/out.json";
  const std::string err = dir_ + "/err.txt";
  for (const char* spelling : {"-", "/dev/stdout", "/dev/fd/1"}) {
    for (const char* quiet : {"", "--quiet"}) {
      const Output out = Train(absl::StrCat("--report-json=", spelling, " ", quiet),
                               absl::StrCat("> ", json, " 2> ", err));
      ASSERT_EQ(out.exit_code, 0) << spelling << " " << quiet << "\n" << out.text;
      auto text = ReadFileToString(Env::Default(), json);
      ASSERT_TRUE(text.ok());
      EXPECT_TRUE(nlohmann::json::accept(*text)) << spelling << " " << quiet << ":\n" << *text;
      auto errors = ReadFileToString(Env::Default(), err);
      ASSERT_TRUE(errors.ok());
      EXPECT_NE(errors->find("epoch 1:"), std::string::npos) << *errors;
    }
  }
  // Through a pipe, and to the file stdout is redirected to.
  Output out = Train("--report-json=- 2>/dev/null", absl::StrCat("| cat > ", json));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(nlohmann::json::accept(*ReadFileToString(Env::Default(), json)));
  out = Train(absl::StrCat("--report-json=", json), absl::StrCat("> ", json, " 2>/dev/null"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_TRUE(nlohmann::json::accept(*ReadFileToString(Env::Default(), json)));
}

TEST_F(ToolOutputsTest, TwoOutputsOnStdoutAreAUsageError) {
  const Output out = Train("--report-json=- --metrics-out=/dev/stdout");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--report-json and --metrics-out both write to stdout"),
            std::string::npos)
      << out.text;
}

// A 100 KB --transforms list, flag name or value was echoed whole; an ANSI escape in a value or
// a path reached the terminal raw. Each message is one short line, escaped.
TEST_F(ToolOutputsTest, EchoedArgumentsAreEscapedAndBounded) {
  const std::string big(100000, 'k');
  for (const std::string& args :
       {absl::StrCat("--transforms=", big), absl::StrCat("--transforms='X(", big, ")'"),
        absl::StrCat("--", big, "=1"), absl::StrCat("--epochs=", big),
        absl::StrCat("--device=", big), absl::StrCat("--optimizer=", big),
        absl::StrCat("--layers=784,", big, ",10"), absl::StrCat("--h2d-format=", big),
        absl::StrCat("--normalize-mean=", big), absl::StrCat("--what-if=", big),
        absl::StrCat("--inject-delay=", big, ":1"), big}) {
    const Output out = Train(args);
    EXPECT_EQ(out.exit_code, 2) << out.text.substr(0, 300);
    EXPECT_LT(out.text.size(), 1500u) << out.text.substr(0, 300);
    EXPECT_NE(out.text.find(" bytes"), std::string::npos) << out.text.substr(0, 300);
  }
  const std::string red = absl::StrCat(std::string(1, kEsc), "[31m");
  for (const std::string& args :
       {absl::StrCat("--device='", red, "'"), absl::StrCat("--transforms='", red, "()'"),
        absl::StrCat("--lr-schedule='", red, "'"), absl::StrCat("--data='", dir_, "/", red, "'")}) {
    const Output out = Train(args);
    EXPECT_NE(out.exit_code, 0) << out.text;
    EXPECT_EQ(out.text.find(kEsc), std::string::npos) << args;
    EXPECT_NE(out.text.find("\\x1b[31m"), std::string::npos) << out.text;
  }
  const Output out = Shard(absl::StrCat(big, " x"));
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_EQ(out.text.find(big), std::string::npos);
  EXPECT_NE(out.text.find("... (100000 bytes)"), std::string::npos) << out.text.substr(0, 300);
}

TEST_F(ToolOutputsTest, ShardOutputsThatCannotBeWrittenAreRefusedBeforeReading) {
  // create --out: a FIFO where the dataset directory goes.
  const std::string fifo = Fifo("out.fifo");
  Output out =
      Shard(absl::StrCat("create --images=", dir_, "/none --labels=", dir_, "/none --out=", fifo));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--out ", fifo, ": is a FIFO (expected a directory)")),
            std::string::npos)
      << out.text;
  // export --out: its images file is a FIFO without a reader (this used to block for ever).
  ASSERT_EQ(::mkdir((dir_ + "/idx").c_str(), 0755), 0);
  const std::string images = Fifo("idx/train-images-idx3-ubyte");
  out = Shard(absl::StrCat("export ", dir_, "/data --out=", dir_, "/idx/train"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat(
                "--out ", images, ": a FIFO that no process is reading (start its reader first)")),
            std::string::npos)
      << out.text;
  EXPECT_LT(out.seconds, 20);
}

}  // namespace
}  // namespace sluice
