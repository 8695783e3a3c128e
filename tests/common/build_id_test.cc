#include "common/build_id.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// The test binary links sluice::common statically, so BuildId() is this executable's: its
// note, as the linker wrote it into the file (n_namesz 4, n_descsz, n_type 3 =
// NT_GNU_BUILD_ID, "GNU\0", the ID bytes), must appear in /proc/self/exe.
TEST(BuildId, IsTheNoteTheLinkerWroteIntoThisExecutable) {
  const std::string& id = BuildId();
  ASSERT_FALSE(id.empty()) << "no GNU build-ID note: was the test linked with --build-id=none?";
  ASSERT_EQ(id.size() % 2, 0u);
  ASSERT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  std::string bytes;
  for (size_t i = 0; i < id.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(id.substr(i, 2), nullptr, 16));
  }
  const uint32_t header[3] = {4, static_cast<uint32_t>(bytes.size()), 3};
  std::string note(reinterpret_cast<const char*>(header), sizeof(header));
  note += std::string("GNU\0", 4) + bytes;
  std::ifstream exe("/proc/self/exe", std::ios::binary);
  ASSERT_TRUE(exe.good());
  const std::string file((std::istreambuf_iterator<char>(exe)), std::istreambuf_iterator<char>());
  EXPECT_NE(file.find(note), std::string::npos) << "build ID " << id << " not in the executable";
  EXPECT_EQ(&BuildId(), &id);  // computed once
}

}  // namespace
}  // namespace sluice
