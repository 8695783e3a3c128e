#include "common/limits.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

// A field of /proc/self/status or /proc/meminfo, in bytes ("Name:   123 kB"); 0 when absent.
uint64_t ProcKiBField(const char* file, const char* name) {
  FILE* f = std::fopen(file, "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  const size_t len = std::strlen(name);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, name, len) == 0 && line[len] == ':') {
      unsigned long long v = 0;
      if (std::sscanf(line + len + 1, "%llu", &v) == 1) kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

}  // namespace

int HardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

// The cgroup's CPU quota in cores (rounded up), or 0 when unlimited or unknown.
int CgroupCpuQuota() {
  auto read_two = [](const char* path, std::string* a, std::string* b) {
    std::FILE* f = std::fopen(path, "r");
    if (f == nullptr) return false;
    char x[64] = {0}, y[64] = {0};
    const int n = std::fscanf(f, "%63s %63s", x, y);
    std::fclose(f);
    if (n < 1) return false;
    *a = x;
    *b = n > 1 ? y : "";
    return true;
  };
  std::string quota, period;
  if (read_two("/sys/fs/cgroup/cpu.max", &quota, &period)) {  // cgroup v2: "max 100000"
    if (quota == "max") return 0;
  } else {  // cgroup v1
    std::string unused;
    if (!read_two("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", &quota, &unused)) return 0;
    if (!read_two("/sys/fs/cgroup/cpu/cpu.cfs_period_us", &period, &unused)) return 0;
  }
  const long long q = std::atoll(quota.c_str()), p = std::atoll(period.c_str());
  if (q <= 0 || p <= 0) return 0;
  return static_cast<int>((q + p - 1) / p);
}

}  // namespace

int UsableCores() {
  int cores = HardwareThreads();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  if (const int quota = CgroupCpuQuota(); quota > 0) cores = std::min(cores, quota);
  return cores;
}

int MaxThreads() { return 4 * HardwareThreads(); }

absl::Status CheckThreadCount(absl::string_view flag, int64_t value) {
  if (value <= MaxThreads()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", value, " is more than the maximum ", MaxThreads(),
                   " (4 x the ", HardwareThreads(), " hardware threads)"));
}

absl::Status CheckAtMost(absl::string_view flag, int64_t value, int64_t max,
                         absl::string_view why) {
  if (value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": ", value, " is more than the maximum ", max, " (", why, ")"));
}

std::string ExactNumber(double value) {
  // Whole numbers as integers ("10000001", not "1e+07"); 2^53 is where doubles stop holding
  // every integer.
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) <= 0x1p53) {
    return absl::StrFormat("%.0f", value);
  }
  // Otherwise the fewest significant digits that read back as the same double (StrCat's six
  // digits print 10000001 and 1e7 alike).
  for (int digits = 1; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

absl::Status CheckInRange(absl::string_view flag, double value, double min, double max,
                          absl::string_view why) {
  if (value >= min && value <= max) return absl::OkStatus();  // false for NaN
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", ExactNumber(value),
                                                 " is not in [", ExactNumber(min), ", ",
                                                 ExactNumber(max), "] (", why, ")"));
}

namespace {

uint64_t OpenFileCount() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  uint64_t n = 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n > 3 ? n - 3 : 0;  // ".", ".." and the directory's own descriptor
}

}  // namespace

absl::Status ReserveOpenFiles(uint64_t files, absl::string_view files_are, absl::string_view what) {
  constexpr uint64_t kMargin = 64;  // the process's other files: logs, outputs, sockets
  struct rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return absl::OkStatus();
  const uint64_t open_now = OpenFileCount();
  const uint64_t need = open_now + files + kMargin;
  if (lim.rlim_cur == RLIM_INFINITY || need <= lim.rlim_cur) return absl::OkStatus();
  // The whole sum: "needs 59 open files ... at most 100" alone hid the margin and the files
  // already open.
  const std::string needs =
      absl::StrCat(what, ": needs ", files, " ", files_are, " + ", kMargin, " spare + ", open_now,
                   " already open = ", need, " open files");
  if (lim.rlim_max != RLIM_INFINITY && need > lim.rlim_max) {
    return absl::ResourceExhaustedError(
        absl::StrCat(needs, "; this process may open at most ", lim.rlim_max, " (ulimit -n: soft ",
                     lim.rlim_cur, ", hard ", lim.rlim_max,
                     "); raise the hard limit, or write fewer, larger shards (sluice-shard create "
                     "--records-per-shard)"));
  }
  const rlim_t soft = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(need) : lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat(needs, "; raising the soft limit (ulimit -n) ",
                                                     soft, " to ", lim.rlim_cur,
                                                     " failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status CheckThreadsCanStart(int threads, absl::string_view what) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::thread> started;
  started.reserve(std::max(threads, 0));
  std::string refused;
  for (int i = 0; i < threads; ++i) {
    try {
      started.emplace_back([&] {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return release; });
      });
    } catch (const std::system_error& e) {
      refused = e.what();
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  for (std::thread& t : started) t.join();
  if (refused.empty()) return absl::OkStatus();
  struct rlimit lim;
  const std::string limit =
      ::getrlimit(RLIMIT_NPROC, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
          ? absl::StrCat("ulimit -u is ", lim.rlim_cur, " processes and threads for this user")
          : std::string("the system's thread limit");
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot start ", what, ": ", threads, " threads are needed and only ", started.size(),
      " could start (", refused, "; ", limit, "); lower the thread count or raise the limit"));
}

absl::StatusOr<uint64_t> CheckedProduct(absl::string_view what,
                                        std::initializer_list<uint64_t> factors) {
  uint64_t product = 1;
  for (uint64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": ", absl::StrJoin(factors, " x "), " bytes overflows 64 bits"));
    }
  }
  return product;
}

uint64_t AddressSpaceLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<uint64_t>(rl.rlim_cur);
}

uint64_t AddressSpaceInUse() { return ProcKiBField("/proc/self/status", "VmSize"); }

AvailableMemory GetAvailableMemory() {
  AvailableMemory m;
  m.bytes = ProcKiBField("/proc/meminfo", "MemAvailable");
  if (m.bytes == 0) {
    m.bytes = static_cast<uint64_t>(::sysconf(_SC_AVPHYS_PAGES)) *
              static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  m.limited_by = "available RAM";
  if (const uint64_t limit = AddressSpaceLimit(); limit > 0) {
    const uint64_t used = AddressSpaceInUse();
    const uint64_t left = limit > used ? limit - used : 0;
    if (m.bytes == 0 || left < m.bytes) {
      m.bytes = left;
      m.limited_by = absl::StrCat("the address-space limit, ulimit -v ", limit / 1024,
                                  " KiB, of which ", used / 1024, " KiB are in use");
    }
  }
  return m;
}

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " bytes") : absl::StrFormat("%.1f %s", v, units[u]);
}

absl::Status CheckMemory(absl::string_view what, uint64_t bytes) {
  const AvailableMemory m = GetAvailableMemory();
  if (bytes <= m.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(what, " needs ", FormatBytes(bytes),
                                                   ", more than the ", FormatBytes(m.bytes),
                                                   " available (", m.limited_by, ")"));
}

}  // namespace sluice
