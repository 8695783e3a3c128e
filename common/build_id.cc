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

// The NT_GNU_BUILD_ID note of the loaded object `info`, if any, as hex. Notes are padded to the
// segment's alignment (4, or 8 in segments such as .note.gnu.property); every length is checked
// against the bytes left in the segment before it is used.
std::string NoteId(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align == 8 ? 8 : 4;
    auto pad = [align](size_t n) { return (n + align - 1) & ~(align - 1); };
    const char* seg = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const size_t size = ph.p_memsz;
    size_t off = 0;
    while (size - off >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) n;
      std::memcpy(&n, seg + off, sizeof(n));
      const size_t left = size - off - sizeof(n);
      const size_t name_bytes = pad(n.n_namesz);
      if (name_bytes > left || n.n_descsz > left - name_bytes) break;
      const char* name = seg + off + sizeof(n);
      const char* desc = name + name_bytes;
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
      const size_t next = sizeof(n) + name_bytes + pad(n.n_descsz);
      if (next > size - off) break;
      off += next;
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
