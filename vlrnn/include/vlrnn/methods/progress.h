#pragma once
// Progress of a long gradient computation, for whoever called it.
//
// NOTE [ Progress of a long call ]
// A schedule's work is known before it runs (its op list), and some schedules recompute
// quadratically in T (revolve with one slot: T(T-1)/2 steps), so a caller deserves to hear
// the size of the work up front and to see it advance. The executor reports to the sink
// installed on its thread: planned() once, with the forward steps it will run, then
// advanced() after each forward op. Measurement runs that a method makes for itself (the
// planner's calibration, its budget check) pause the sink: they are not the caller's work.
// The sink is thread-local, so concurrent calls on other threads report nowhere.

#include <cstdint>
#include <string>

namespace vlrnn {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // `forward_steps`: steps the schedule will run forward in all, with and without grad
  // (T for each grad pass; recomputation on top), for a chain of `time_steps` steps.
  virtual void planned(const std::string& schedule, int64_t time_steps,
                       int64_t forward_steps) = 0;
  // `forward_steps_done` of the planned total have run.
  virtual void advanced(int64_t forward_steps_done) = 0;
};

// The sink of the calling thread, or nullptr.
ProgressSink* progress_sink();

// Installs `sink` on this thread for its lifetime (nullptr: none, which pauses reporting).
class ScopedProgressSink {
 public:
  explicit ScopedProgressSink(ProgressSink* sink);
  ~ScopedProgressSink();
  ScopedProgressSink(const ScopedProgressSink&) = delete;
  ScopedProgressSink& operator=(const ScopedProgressSink&) = delete;

 private:
  ProgressSink* previous_;
};

// A method's own measurement runs report nothing (NOTE above).
class PausedProgress : public ScopedProgressSink {
 public:
  PausedProgress() : ScopedProgressSink(nullptr) {}
};

}  // namespace vlrnn
