#pragma once
// Exact bytes of live CPU tensors: a tracking allocator installed into LibTorch's CPU
// allocator slot. Every CPU tensor storage allocated while it is installed is counted until
// it is freed (whenever that is, installed or not); storages allocated before installation
// are freed by their own deleter and never counted. The bytes are what LibTorch asked for
// (the storage's nbytes), not what malloc rounded them up to.

#include <cstddef>
#include <cstdint>

namespace vlrnn::measure {

class CpuMemoryTracker {
 public:
  // The process-wide tracker (never destroyed: storages outlive any scope, and their
  // deleter must find it).
  static CpuMemoryTracker& instance();

  // Installs the tracker in front of the current CPU allocator (idempotent).
  void install();
  // Puts the original allocator back; storages the tracker handed out stay counted until
  // they are freed.
  void uninstall();
  bool installed() const;

  int64_t current_bytes() const;  // bytes of tracked storages alive now
  int64_t peak_bytes() const;     // the most current_bytes() has been since reset_peak()
  // Sets the peak to the current bytes and returns them.
  int64_t reset_peak();

  // A hard cap on tracked bytes: an allocation that would take current_bytes() past
  // `bytes` throws c10::OutOfMemoryError ("out of memory" in its message), as a device
  // would. 0 removes the cap. Lets a CPU run emulate a memory budget exactly.
  void set_limit(int64_t bytes);
  int64_t limit() const;

  CpuMemoryTracker(const CpuMemoryTracker&) = delete;
  CpuMemoryTracker& operator=(const CpuMemoryTracker&) = delete;

 private:
  CpuMemoryTracker() = default;
};

// Installs the tracker for a scope, and uninstalls it at the end if it installed it.
class ScopedCpuMemoryTracking {
 public:
  ScopedCpuMemoryTracking();
  ~ScopedCpuMemoryTracking();
  ScopedCpuMemoryTracking(const ScopedCpuMemoryTracking&) = delete;
  ScopedCpuMemoryTracking& operator=(const ScopedCpuMemoryTracking&) = delete;

 private:
  bool installed_here_ = false;
};

}  // namespace vlrnn::measure
