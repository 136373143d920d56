#include "vlrnn/measure/process_memory.h"

#include <fstream>
#include <string>

namespace vlrnn::measure {
namespace {

// The value of a "Key:   1234 kB" line of /proc/self/status, in bytes.
int64_t status_field_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      try {
        return std::stoll(line.substr(key.size() + 1)) * 1024;  // the kernel reports kB
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

}  // namespace

int64_t peak_rss_bytes() { return status_field_bytes("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  if (!clear_refs) return false;
  clear_refs << "5";
  clear_refs.flush();
  return bool(clear_refs);
}

}  // namespace vlrnn::measure
