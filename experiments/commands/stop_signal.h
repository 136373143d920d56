#pragma once
// NOTE [ Stopping a long run ]: while a StopOnSignal is alive, the first SIGINT / SIGTERM
// only asks the command to stop at its next safe point (a sweep after the point being
// measured, a training run after the current step, with its records and a checkpoint
// written); a second one kills at once. Either way what was already written stays, and
// --resume carries on from there.

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace vlrnn::cli {

class StopOnSignal {
 public:
  // `message` is printed when the first signal arrives; it must outlive this object.
  explicit StopOnSignal(const char* message) {
    message_ = message;
    requested_flag() = 0;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
  ~StopOnSignal() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  static bool requested() { return requested_flag() != 0; }

 private:
  static volatile std::sig_atomic_t& requested_flag() {
    static volatile std::sig_atomic_t flag = 0;
    return flag;
  }
  static void on_signal(int signal) {
    if (requested_flag() != 0) {
      std::signal(signal, SIG_DFL);
      std::raise(signal);
      return;
    }
    requested_flag() = signal;
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, message_, std::strlen(message_));
  }
  static inline const char* message_ = "";
};

}  // namespace vlrnn::cli
