// The README's C++ snippet must be exactly the one compiled in examples/quickstart.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> trimmed_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto begin = line.find_first_not_of(' ');
    lines.push_back(begin == std::string::npos ? "" : line.substr(begin));
  }
  return lines;
}

std::string slurp(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file) << "cannot read " << path;
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

TEST(ReadmeSnippet, IsTheCompiledExample) {
  const std::string root = VLRNN_SOURCE_DIR;
  const std::string example = slurp(root + "/examples/quickstart.cpp");
  const std::string begin_marker = "// --- README snippet begin ---\n";
  const auto begin = example.find(begin_marker);
  const auto end = example.find("  // --- README snippet end ---");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const auto snippet = example.substr(begin + begin_marker.size(), end - begin - begin_marker.size());

  const std::string readme = slurp(root + "/README.md");
  const auto code = readme.find("```cpp\n");
  ASSERT_NE(code, std::string::npos);
  const auto code_end = readme.find("```", code + 7);
  EXPECT_EQ(trimmed_lines(readme.substr(code + 7, code_end - code - 7)), trimmed_lines(snippet));
}

}  // namespace
