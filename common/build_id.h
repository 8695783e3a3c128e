// BuildId: the GNU build ID of the ELF object that holds sluice's code (the sluice-train
// executable, a test binary, or the Python extension module), as lowercase hex. The linker
// derives it from the linked contents, so it changes whenever the code does: cached
// measurements of this code (engine/diagnostics/ceilings.h) name it, and a cache written by
// another build is measured again.
// Errors: none; "" when the object has no build-ID note (a linker run with --build-id=none).
// Thread safety: thread safe (computed once).
#ifndef SLUICE_COMMON_BUILD_ID_H_
#define SLUICE_COMMON_BUILD_ID_H_

#include <string>

namespace sluice {

const std::string& BuildId();

}  // namespace sluice

#endif  // SLUICE_COMMON_BUILD_ID_H_
