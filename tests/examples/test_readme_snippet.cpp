// docs/cpp.md's C++ snippet must be exactly the one compiled in examples/quickstart.cpp, and
// each snippet of docs/models.md marked "<!-- snippet: PATH NAME -->" exactly the lines of
// PATH between "README NAME begin" and "README NAME end" (the "bring your own model" page,
// whose files ctest's examples.* tests compile and run).
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

  const std::string page = slurp(root + "/docs/cpp.md");
  // The first C++ block of the page that shows the library from C++.
  const auto section = page.find("# Using VLRNN from C++\n");
  ASSERT_NE(section, std::string::npos) << "docs/cpp.md lacks its '# Using VLRNN from C++'";
  const auto code = page.find("```cpp\n", section);
  ASSERT_NE(code, std::string::npos);
  const auto code_end = page.find("```", code + 7);
  EXPECT_EQ(trimmed_lines(page.substr(code + 7, code_end - code - 7)), trimmed_lines(snippet));
}

TEST(ReadmeSnippet, MarkedSnippetsAreTheTestedFiles) {
  const std::string root = VLRNN_SOURCE_DIR;
  const std::string page = slurp(root + "/docs/models.md");
  const std::string marker = "<!-- snippet: ";
  int found = 0;
  for (auto at = page.find(marker); at != std::string::npos; at = page.find(marker, at + 1)) {
    const auto close = page.find(" -->", at);
    const std::string spec = page.substr(at + marker.size(), close - at - marker.size());
    const auto space = spec.find(' ');
    const std::string path = spec.substr(0, space), name = spec.substr(space + 1);
    SCOPED_TRACE(spec);
    const auto fence = page.find("```", close);
    const auto code = page.find('\n', fence) + 1;
    const auto code_end = page.find("```", code);
    const std::string comment = path.size() > 3 && path.substr(path.size() - 3) == ".py" ? "#" : "//";
    const std::string source = slurp(root + "/" + path);
    const std::string begin_marker = comment + " --- README " + name + " begin ---\n";
    const auto begin = source.find(begin_marker);
    const auto end = source.find(comment + " --- README " + name + " end ---");
    ASSERT_NE(begin, std::string::npos) << path << " lacks \"" << begin_marker << "\"";
    ASSERT_NE(end, std::string::npos);
    auto without_trailing_blanks = [](std::vector<std::string> lines) {
      while (!lines.empty() && lines.back().empty()) lines.pop_back();
      return lines;
    };
    EXPECT_EQ(without_trailing_blanks(trimmed_lines(page.substr(code, code_end - code))),
              without_trailing_blanks(trimmed_lines(
                  source.substr(begin + begin_marker.size(), end - begin - begin_marker.size()))));
    ++found;
  }
  EXPECT_EQ(found, 5) << "the custom cell, its verification, the plugin, the TorchScript cell "
                          "and head";
}

}  // namespace
