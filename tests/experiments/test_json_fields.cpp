#include "test_util.h"

#include "lib/json_fields.h"

#include <filesystem>
#include <fstream>

namespace vlrnn::experiments::json_fields {
namespace {

using testing::expect_error_mentions;

TEST(JsonFields, ParsesTextWithComments) {
  const auto v = parse_json_text("{\"T\": [64, 128]  // the lengths\n}", "x.json");
  EXPECT_EQ(v["T"], json({64, 128}));
}

// Found by the json_fields fuzz target (tests/fuzz/regressions/json_fields/): a number too
// large for a double is nlohmann's out_of_range, not a parse_error, and escaped the reader as
// "[json.exception.out_of_range.406] number overflow" without the file's name.
TEST(JsonFields, ANumberTooLargeIsInvalidJsonNamingTheFile) {
  expect_error_mentions([] { parse_json_text("9.1e29247", "sweep.json"); },
                        {"config \"sweep.json\"", "not valid JSON", "9.1e29247"});
  const auto path = std::filesystem::temp_directory_path() / "vlrnn_test_number_overflow.json";
  std::ofstream(path) << R"({"T": [1e999]})";
  expect_error_mentions([&] { read_json_file(path.string()); },
                        {path.string(), "not valid JSON", "1e999"});
  std::filesystem::remove(path);
}

// Above INT64_MAX the integer wrapped to a negative one, and the message showed that.
TEST(JsonFields, AnIntegerAboveInt64MaxIsShownAsWritten) {
  expect_error_mentions([] { read_int(json::parse("10000000000000000000"), "T", 1); },
                        {"config T", ">= 1", "10000000000000000000", "largest"});
  EXPECT_EQ(read_int(json::parse("9223372036854775807"), "T", 1), INT64_MAX);
}

TEST(JsonFields, MebibytesBecomeBytesWithinRange) {
  EXPECT_EQ(read_mib(json(1), "budget"), 1048576);
  EXPECT_EQ(read_mib(json(0.5), "budget"), 524288);
  EXPECT_EQ(read_mib(json(4398046511104.0), "budget"), int64_t(1) << 62);
  expect_error_mentions([] { read_mib(json(1e300), "budget"); }, {"config budget", "4 EiB", "1e+300"});
  expect_error_mentions([] { read_mib(json(1e-9), "budget"); }, {"config budget", "1 byte"});
  expect_error_mentions([] { read_mib(json(0), "budget"); }, {"config budget", "positive"});
  expect_error_mentions([] { read_mib(json("8"), "budget"); }, {"config budget", "a string"});
}

// A renamed key fails with its own message, not as an unknown key; a key at the top level
// (path "") is named bare.
TEST(JsonFields, ARenamedKeyIsRefusedNamingItsNewName) {
  const std::vector<RenamedKey> renamed = {{"steps", "renamed to \"time_steps\""}};
  const auto nested = json::parse(R"({"kind": "adding", "steps": 8})");
  expect_error_mentions([&] { check_keys(nested, "task", {"kind", "time_steps"}, renamed); },
                        {"config task.steps: renamed to \"time_steps\""});
  const auto top = json::parse(R"({"steps": 8})");
  expect_error_mentions([&] { check_keys(top, "", {"name"}, renamed); },
                        {"config steps: renamed to \"time_steps\""});
  expect_error_mentions([&] { check_keys(top, "", {"name"}); },
                        {"config steps: unknown key; known keys: name"});
  check_keys(json::parse(R"({"time_steps": 8})"), "task", {"time_steps"}, renamed);
}

}  // namespace
}  // namespace vlrnn::experiments::json_fields
