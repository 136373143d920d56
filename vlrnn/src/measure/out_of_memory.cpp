#include "vlrnn/measure/out_of_memory.h"

#include <c10/util/Exception.h>

#include <new>

namespace vlrnn::measure {

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  const std::string message = short_message(error);
  return message.find("out of memory") != std::string::npos ||
         message.find("not enough memory") != std::string::npos;
}

std::string short_message(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace vlrnn::measure
