// The version of fusegen: printed by --version, stamped into generated packages and part
// of the build key (a new fusegen rebuilds).
#pragma once

namespace fusegen {

inline constexpr const char* kVersion = "0.1.0";

} // namespace fusegen
