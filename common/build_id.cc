#include "common/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace sluice {
namespace {

struct Search {
  uintptr_t address;  // an address inside the object we want
  std::string id;
  bool found = false;
};

size_t Align4(size_t n) { return (n + 3) & ~size_t{3}; }

// The NT_GNU_BUILD_ID note of the loaded object `info`, if any, as hex.
std::string NoteId(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) n;
      std::memcpy(&n, p, sizeof(n));
      const char* name = p + sizeof(n);
      const char* desc = name + Align4(n.n_namesz);
      if (desc + n.n_descsz > end) break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        for (uint32_t k = 0; k < n.n_descsz; ++k) {
          const auto byte = static_cast<unsigned char>(desc[k]);
          hex += kHex[byte >> 4];
          hex += kHex[byte & 15];
        }
        return hex;
      }
      p = desc + Align4(n.n_descsz);
    }
  }
  return "";
}

int Visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (s->address >= begin && s->address < begin + ph.p_memsz) {
      s->id = NoteId(info);
      s->found = true;
      return 1;  // stop
    }
  }
  return 0;
}

}  // namespace

const std::string& BuildId() {
  static const std::string id = [] {
    Search s{reinterpret_cast<uintptr_t>(&BuildId), "", false};
    dl_iterate_phdr(&Visit, &s);
    return s.id;
  }();
  return id;
}

}  // namespace sluice
