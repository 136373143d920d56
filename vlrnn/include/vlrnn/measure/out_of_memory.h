#pragma once
// Telling "ran out of memory" apart from other failures, so a sweep can record it as a
// result (the method does not fit) rather than an error.

#include <exception>
#include <string>

namespace vlrnn::measure {

// True for c10::OutOfMemoryError, std::bad_alloc, and c10::Error messages that say so
// ("out of memory" from CUDA and the tracking allocator's limit, "not enough memory" from
// LibTorch's CPU allocator).
bool is_out_of_memory(const std::exception& error);

// The message without LibTorch's C++ backtrace.
std::string short_message(const std::exception& error);

}  // namespace vlrnn::measure
