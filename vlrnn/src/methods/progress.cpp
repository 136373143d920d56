#include "vlrnn/methods/progress.h"

namespace vlrnn {
namespace {
thread_local ProgressSink* current_sink = nullptr;
}  // namespace

ProgressSink* progress_sink() { return current_sink; }

ScopedProgressSink::ScopedProgressSink(ProgressSink* sink) : previous_(current_sink) {
  current_sink = sink;
}

ScopedProgressSink::~ScopedProgressSink() { current_sink = previous_; }

}  // namespace vlrnn
