#pragma once
// The process's resident set (RSS), a second, coarser memory figure: it includes what no
// tensor owns (BLAS buffers, the allocator's cached free memory, code), and the peak is
// process-wide. Linux only (/proc); elsewhere every call reports -1 / false.

#include <cstdint>

namespace vlrnn::measure {

int64_t peak_rss_bytes();     // VmHWM (high-water mark), or -1 when unavailable
// Resets VmHWM to the current RSS by writing "5" to /proc/self/clear_refs; false where the
// kernel or a sandbox does not permit it (then the peak is the process's lifetime peak).
bool reset_peak_rss();

}  // namespace vlrnn::measure
