#pragma once
// Human-readable numbers for tables and progress lines.

#include <cstdint>
#include <string>

namespace vlrnn::experiments {

std::string format_bytes(double bytes);      // "512 B", "3.2 KiB", "1.25 GiB"; "-" if < 0
std::string format_seconds(double seconds);  // "850 us", "12.3 ms", "1.234 s", "2m05s"
std::string format_rate(double flops_per_second);  // "12.3 GFLOP/s"
std::string format_duration(double seconds);       // "45s", "3m20s", "1h02m" (ETA)

}  // namespace vlrnn::experiments
