#include "test_util.h"

#include "lib/max_batch.h"
#include "lib/results_store.h"

#include <filesystem>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

class ResultsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_test_folder("vlrnn_store_");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ResultsStoreTest, AppendsRecordsAndReadsTheirKeys) {
  ResultsStore store((dir_ / "nested").string());
  EXPECT_FALSE(store.has_records());
  store.append({{"key", "a"}, {"T", 8}});
  store.append({{"key", "b"}, {"T", 16}, {"time_s", {{"median", 0.5}}}});
  EXPECT_TRUE(store.has_records());
  EXPECT_EQ(store.recorded_keys(), (std::set<std::string>{"a", "b"}));
  store.write_csv();
  std::ifstream csv(store.csv_path());
  std::string header, row1, row2;
  std::getline(csv, header);
  std::getline(csv, row1);
  std::getline(csv, row2);
  EXPECT_EQ(header, "T,time_s.median,key");
  EXPECT_EQ(row1, "8,,a");
  EXPECT_EQ(row2, "16,0.5,b");
}

TEST_F(ResultsStoreTest, ATornLastLineIsSkippedAndTheNextRecordStartsAfreshLine) {
  ResultsStore store(dir_.string());
  store.append({{"key", "a"}});
  {
    std::ofstream torn(store.jsonl_path(), std::ios::app);
    torn << "{\"key\": \"half";  // a write cut short, no newline
  }
  store.append({{"key", "c"}});
  EXPECT_EQ(store.recorded_keys(), (std::set<std::string>{"a", "c"}));
  EXPECT_EQ(store.read_records().size(), 2u);
}

TEST_F(ResultsStoreTest, MoveToPreviousKeepsTheLastSweep) {
  ResultsStore store(dir_.string());
  store.append({{"key", "old"}});
  store.write_meta({{"status", "complete"}});
  store.move_to_previous();
  EXPECT_FALSE(store.has_records());
  EXPECT_TRUE(fs::exists(dir_ / "previous" / "results.jsonl"));
  EXPECT_TRUE(fs::exists(dir_ / "previous" / "meta.json"));
  EXPECT_TRUE(store.read_meta().empty());
}

TEST_F(ResultsStoreTest, MetaAndResultFilesCarryTheSchemaVersion) {
  ResultsStore store(dir_.string());
  store.write_meta({{"command", "vlrnn sweep x.json"}, {"schema_version", 1}});
  EXPECT_EQ(store.read_meta()["schema_version"], kResultsSchemaVersion);
  EXPECT_EQ(store.read_meta()["command"], "vlrnn sweep x.json");

  // compare --json, verify --json: meta and records in one file.
  const std::string path = (dir_ / "one.json").string();
  write_results_file(path, {{"command", "vlrnn compare --json one.json"}},
                     std::vector<json>{json{{"kind", "compare"}, {"method", "full"}}}, "--json");
  const auto document = json::parse(std::ifstream(path));
  EXPECT_EQ(document.size(), 2u);
  EXPECT_EQ(document["meta"]["schema_version"], kResultsSchemaVersion);
  EXPECT_EQ(document["meta"]["command"], "vlrnn compare --json one.json");
  ASSERT_EQ(document["records"].size(), 1u);
  EXPECT_EQ(document["records"][0]["method"], "full");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  testing::expect_error_mentions(
      [&] {
        write_results_file((dir_ / "no" / "such" / "dir.json").string(), json::object(),
                           std::vector<json>{}, "--json");
      },
      {"--json", "cannot write"});
}

TEST(RecordsToCsv, QuotesAndFlattens) {
  const auto csv = records_to_csv({json{{"method", "tbptt:k1=8,k2=16"}, {"probes", json::array({1, 2})},
                                        {"status", "ok"}}});
  EXPECT_EQ(csv, "status,method,probes\nok,\"tbptt:k1=8,k2=16\",\"[1,2]\"\n");
}

TEST(MaxBatchSearch, DoublesThenBisects) {
  std::vector<int64_t> probed;
  auto under = [&](int64_t limit) {
    return [&probed, limit](int64_t b) {
      probed.push_back(b);
      return b <= limit;
    };
  };
  EXPECT_EQ(search_max_batch(1, 1 << 20, 1, under(100)), 100);
  EXPECT_EQ(probed, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101}));
  probed.clear();
  EXPECT_EQ(search_max_batch(3, 1000, 4, under(50)), 48);  // multiples of 4 from 4
  EXPECT_EQ(probed.front(), 4);
  EXPECT_EQ(search_max_batch(1, 40, 1, under(1000)), 40);  // capped by the limit
  EXPECT_EQ(search_max_batch(8, 100, 1, under(5)), 0);     // not even the start fits
  for (int64_t limit : {1, 2, 3, 7, 33, 64, 65, 999}) {
    EXPECT_EQ(search_max_batch(1, 4096, 1, under(limit)), limit) << limit;
  }
}

}  // namespace
}  // namespace vlrnn::experiments
