#include "vlrnn/measure/cpu_memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

// LibTorch 2.3 made Allocator::allocate non-const and added the pure virtual copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define VLRNN_ALLOCATE_QUALIFIER
#else
#define VLRNN_ALLOCATE_QUALIFIER const
#endif

namespace vlrnn::measure {
namespace {

// Higher than the priority LibTorch registers its CPU allocator with (0), so that nothing
// registered statically can displace the tracker while it is installed.
constexpr uint8_t kPriority = 200;

// NOTE [ Why a side table, not a wrapping context ]
// A DataPtr carries one data pointer and one context. Wrapping the original DataPtr in a
// heap context would make data != context, which breaks Allocator::raw_allocate (some
// kernels use the raw interface). So the DataPtr we hand out is (data, data, deleter), as
// the default allocator's is, and the original DataPtr — which knows how to free — waits in
// this table until our deleter hands it back.
struct TrackerState {
  std::atomic<int64_t> current{0}, peak{0}, limit{0};
  std::mutex mutex;  // guards `live` and `original`
  struct Entry {
    c10::DataPtr original;
    int64_t bytes;
  };
  std::unordered_map<void*, Entry> live;
  c10::Allocator* original = nullptr;  // the allocator we forward to; null = not installed
  c10::Allocator* forward_to = nullptr;  // last allocator we forwarded to (kept after uninstall)

  void add(int64_t bytes) {
    const int64_t now = current.fetch_add(bytes) + bytes;
    int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
  }
};

TrackerState& state() {
  static auto* s = new TrackerState();  // leaked on purpose: see CpuMemoryTracker::instance
  return *s;
}

void tracked_delete(void* data) {
  auto& s = state();
  c10::DataPtr original;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(data);
    if (it == s.live.end()) return;  // cannot happen: every pointer we hand out is listed
    original = std::move(it->second.original);
    s.current.fetch_sub(it->second.bytes);
    s.live.erase(it);
  }
  // `original` frees the memory through the allocator that made it, leaving this scope.
}

class TrackingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) VLRNN_ALLOCATE_QUALIFIER override {
    auto& s = state();
    c10::Allocator* inner = s.forward_to;
    TORCH_INTERNAL_ASSERT(inner != nullptr, "vlrnn tracking allocator used before install()");
    // Zero bytes: the default allocator returns a null pointer; nothing to count, and a
    // null key could not be told apart in the table.
    if (n == 0) return inner->allocate(0);
    const int64_t bytes = static_cast<int64_t>(n);
    const int64_t cap = s.limit.load();
    TORCH_CHECK_WITH(OutOfMemoryError, cap == 0 || s.current.load() + bytes <= cap,
                     "CPU out of memory (vlrnn tracking allocator limit): tried to allocate ",
                     bytes, " bytes with ", s.current.load(), " bytes live and a limit of ",
                     cap, " bytes");
    c10::DataPtr original = inner->allocate(n);
    // get() is const-qualified in LibTorch 2.x; the memory is ours to hand out.
    void* data = const_cast<void*>(static_cast<const void*>(original.get()));
    const c10::Device device = original.device();
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.live[data] = TrackerState::Entry{std::move(original), bytes};
    }
    s.add(bytes);
    return {data, data, &tracked_delete, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &tracked_delete; }

  // Pure virtual from LibTorch 2.3 on; absent before, hence no `override`.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }
};

TrackingAllocator& tracking_allocator() {
  static auto* a = new TrackingAllocator();  // storages keep a pointer to it: never freed
  return *a;
}

}  // namespace

CpuMemoryTracker& CpuMemoryTracker::instance() {
  // Leaked on purpose: tensors freed during static destruction still run our deleter.
  static auto* tracker = new CpuMemoryTracker();
  return *tracker;
}

void CpuMemoryTracker::install() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.original != nullptr) return;
  c10::Allocator* current = c10::GetAllocator(c10::DeviceType::CPU);
  if (current == &tracking_allocator()) return;
  s.original = current;
  s.forward_to = current;
  c10::SetAllocator(c10::DeviceType::CPU, &tracking_allocator(), kPriority);
}

void CpuMemoryTracker::uninstall() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.original == nullptr) return;
  c10::SetAllocator(c10::DeviceType::CPU, s.original, kPriority);
  s.original = nullptr;
  // forward_to stays: a storage made while installed may still resize through us.
}

bool CpuMemoryTracker::installed() const {
  return c10::GetAllocator(c10::DeviceType::CPU) == &tracking_allocator();
}

int64_t CpuMemoryTracker::current_bytes() const { return state().current.load(); }
int64_t CpuMemoryTracker::peak_bytes() const { return state().peak.load(); }

int64_t CpuMemoryTracker::reset_peak() {
  auto& s = state();
  const int64_t now = s.current.load();
  s.peak.store(now);
  return now;
}

void CpuMemoryTracker::set_limit(int64_t bytes) {
  TORCH_CHECK(bytes >= 0, "CpuMemoryTracker::set_limit bytes: expected >= 0 (0 = no limit), got ",
              bytes);
  state().limit.store(bytes);
}

int64_t CpuMemoryTracker::limit() const { return state().limit.load(); }

ScopedCpuMemoryTracking::ScopedCpuMemoryTracking() {
  auto& tracker = CpuMemoryTracker::instance();
  if (!tracker.installed()) {
    tracker.install();
    installed_here_ = true;
  }
}

ScopedCpuMemoryTracking::~ScopedCpuMemoryTracking() {
  if (installed_here_) CpuMemoryTracker::instance().uninstall();
}

}  // namespace vlrnn::measure
