#include "lib/units.h"

#include <fmt/format.h>

#include <cmath>

namespace vlrnn::experiments {

std::string format_bytes(double bytes) {
  if (bytes < 0 || std::isnan(bytes)) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format(bytes >= 100 ? "{:.0f} {}" : bytes >= 10 ? "{:.1f} {}" : "{:.2f} {}", bytes,
                     units[u]);
}

std::string format_seconds(double seconds) {
  if (std::isnan(seconds) || seconds < 0) return "-";
  if (seconds < 1e-3) return fmt::format("{:.0f} us", seconds * 1e6);
  if (seconds < 1.0) return fmt::format("{:.1f} ms", seconds * 1e3);
  if (seconds < 100.0) return fmt::format("{:.3f} s", seconds);
  return format_duration(seconds);
}

std::string format_rate(double flops_per_second) {
  if (std::isnan(flops_per_second) || flops_per_second <= 0) return "-";
  return fmt::format("{:.2f} GFLOP/s", flops_per_second * 1e-9);
}

std::string format_duration(double seconds) {
  if (std::isnan(seconds) || seconds < 0) return "?";
  const auto s = int64_t(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
}

}  // namespace vlrnn::experiments
