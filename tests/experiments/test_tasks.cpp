// The training tasks: what each batch holds, that a batch depends on its index alone, and
// that a bad task config names its key.
#include "lib/tasks.h"

#include "idx_test_files.h"
#include "test_util.h"

#include "vlrnn/core/heads.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string error_of(const json& config) {
  try {
    make_task(config);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(Tasks, ABatchIsAFunctionOfSeedSplitAndIndexAlone) {
  const auto task = make_task({{"kind", "copy"}, {"delay", 20}, {"symbols", 3}});
  const auto a = task->batch(Split::kTrain, 5, 8, 1);
  torch::rand({100});  // the global generator does not matter
  const auto again = task->batch(Split::kTrain, 5, 8, 1);
  EXPECT_TRUE(torch::equal(a.inputs, again.inputs));
  EXPECT_TRUE(torch::equal(a.targets, again.targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kTrain, 6, 8, 1).targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kEval, 5, 8, 1).targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kTrain, 5, 8, 2).targets));
}

TEST(Tasks, AddingScoresTheSumOfTheTwoMarkedValuesAtTheLastStep) {
  const auto task = make_task({{"kind", "adding"}, {"time_steps", 30}, {"min_length", 0.5}});
  const auto batch = task->batch(Split::kTrain, 0, 16, 3);
  ASSERT_TRUE(batch.has_lengths());
  EXPECT_EQ(batch.lengths.max().item<int64_t>(), 30);
  EXPECT_GE(batch.lengths.min().item<int64_t>(), 15);
  EXPECT_EQ(scored_steps(batch), 16);
  for (int64_t b = 0; b < 16; ++b) {
    const int64_t len = batch.lengths[b].item<int64_t>();
    const auto values = batch.inputs.select(1, b).select(1, 0);   // [T]
    const auto markers = batch.inputs.select(1, b).select(1, 1);  // [T]
    EXPECT_EQ(markers.sum().item<float>(), 2.0f);
    EXPECT_EQ(markers.slice(0, 0, len / 2).sum().item<float>(), 1.0f);  // one per half
    EXPECT_EQ(markers.slice(0, len).sum().item<float>(), 0.0f);         // none past the end
    const float sum = (values * markers).sum().item<float>();
    EXPECT_FLOAT_EQ(batch.targets[len - 1][b][0].item<float>(), sum);
    EXPECT_EQ(torch::isnan(batch.targets.select(1, b)).sum().item<int64_t>(), 29);
  }
  EXPECT_NEAR(task->chance_loss(), 1.0 / 6.0, 1e-12);
}

TEST(Tasks, CopyScoresTheRecallOfTheSymbolsAfterTheDelimiter) {
  const int64_t symbols = 3, delay = 12, alphabet = 5;
  const auto task = make_task({{"kind", "copy"}, {"delay", delay}, {"symbols", symbols},
                               {"alphabet", alphabet}});
  EXPECT_EQ(task->time_steps(), 2 * symbols + delay);
  EXPECT_EQ(task->input_size(), alphabet + 2);
  const auto batch = task->batch(Split::kTrain, 0, 6, 1);
  const auto codes = batch.inputs.argmax(-1);  // [T, B]
  EXPECT_EQ(scored_steps(batch), symbols * 6);
  for (int64_t b = 0; b < 6; ++b) {
    EXPECT_EQ(codes[symbols + delay - 1][b].item<int64_t>(), alphabet + 1);  // the delimiter
    for (int64_t j = 0; j < symbols; ++j) {
      EXPECT_EQ(batch.targets[symbols + delay + j][b].item<int64_t>(),
                codes[j][b].item<int64_t>() - 1);
    }
    EXPECT_EQ(batch.targets.select(1, b).slice(0, 0, symbols + delay).max().item<int64_t>(),
              kNoTarget);
  }
  EXPECT_NEAR(task->chance_loss(), std::log(5.0), 1e-12);
}

TEST(Tasks, CopyWithVariableDelaysRecallsAtEachSequencesEnd) {
  const auto task = make_task({{"kind", "copy"}, {"delay", 40}, {"symbols", 2},
                               {"min_length", 0.25}});
  const auto batch = task->batch(Split::kTrain, 1, 12, 1);
  ASSERT_TRUE(batch.has_lengths());
  EXPECT_EQ(batch.lengths.max().item<int64_t>(), 44);
  EXPECT_EQ(scored_steps(batch), 2 * 12);
  for (int64_t b = 0; b < 12; ++b) {
    const int64_t len = batch.lengths[b].item<int64_t>();
    EXPECT_NE(batch.targets[len - 1][b].item<int64_t>(), kNoTarget);
    EXPECT_NE(batch.targets[len - 2][b].item<int64_t>(), kNoTarget);
    EXPECT_EQ(batch.targets[len - 3][b].item<int64_t>(), kNoTarget);
  }
}

// episodes: k of the task's sequences back to back in each sequence, by their own lengths,
// a reset at each one's start (NOTE [ Resets ] in vlrnn/core/sequence.h).
TEST(Tasks, EpisodesPackTheTasksSequencesBackToBackWithResets) {
  const json inner = {{"kind", "copy"}, {"delay", 6}, {"symbols", 2}, {"min_length", 0.5}};
  json packed = inner;
  packed["episodes"] = 3;
  const auto one = make_task(inner), three = make_task(packed);
  EXPECT_EQ(three->time_steps(), 3 * one->time_steps());
  EXPECT_NE(three->describe().find("3 episodes packed"), std::string::npos);
  const auto batch = three->batch(Split::kTrain, 0, 4, 1);
  ASSERT_TRUE(batch.has_resets());
  ASSERT_TRUE(batch.has_lengths());
  for (int64_t b = 0; b < 4; ++b) {
    // Three episodes start in sequence b: at 0, and where each earlier one ended.
    const auto starts = batch.resets.select(1, b).nonzero().flatten();
    ASSERT_EQ(starts.size(0), 3);
    EXPECT_EQ(starts[0].item<int64_t>(), 0);
    const int64_t length = batch.lengths[b].item<int64_t>();
    EXPECT_GT(length, starts[2].item<int64_t>());
    // Each episode scores its own recall: as many scored steps as three copies of one.
    const auto scored = scored_mask(batch).select(1, b).sum().item<int64_t>();
    EXPECT_EQ(scored, 3 * 2);
  }
  EXPECT_NE(error_of({{"kind", "copy"}, {"delay", 6}, {"episodes", 0}}).find("task.episodes"),
            std::string::npos);
}

TEST(Tasks, TextWindowsPredictTheNextCharacter) {
  const std::string path = ::testing::TempDir() + "/vlrnn_text_task.txt";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcab";
  std::ofstream(path) << text;
  const auto task = make_task({{"kind", "text"}, {"path", path}, {"time_steps", 16}});
  EXPECT_EQ(task->head_outputs(), 3);  // a, b, c
  const auto batch = task->batch(Split::kTrain, 0, 4, 1);
  const auto ids = batch.inputs.argmax(-1);  // [T, B]
  EXPECT_TRUE(torch::equal(ids.slice(0, 1), batch.targets.slice(0, 0, 15)));
  // Unigram frequencies 2/5, 2/5, 1/5.
  EXPECT_NEAR(task->chance_loss(), -(0.8 * std::log(0.4) + 0.2 * std::log(0.2)), 1e-2);
  std::remove(path.c_str());
}

TEST(Tasks, BadConfigsNameTheKey) {
  EXPECT_NE(error_of({{"kind", "copy"}}).find("task.delay: missing"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "copy"}, {"delay", 0}}).find("task.delay"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "adding"}, {"time_steps", 10}, {"min_length", 2}})
                .find("task.min_length"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "adding"}, {"time_steps", 10}, {"delay", 3}})
                .find("task.delay: unknown"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "adding"}}).find("task.time_steps: missing"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "mnist"}}).find("task.kind"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "fashion_mnist"}, {"steps", 10}}).find("task.steps: unknown"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "fashion_mnist"}, {"permuted", "yes"}}).find("task.permuted"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "text"}, {"path", "/no/such/file"}, {"time_steps", 8}})
                .find("cannot read"), std::string::npos);
}

// "steps", the older name of the length (also the top level's optimizer steps), is refused
// naming "task.time_steps"; a task whose length is not a key of its own (copy: 2S + D;
// Fashion-MNIST: 784) has neither, and either is an unknown key there.
TEST(Tasks, TheOldStepsKeyIsRefusedNamingTimeSteps) {
  for (const json& old : {json{{"kind", "adding"}, {"steps", 10}},
                          json{{"kind", "text"}, {"path", "/no/such/file"}, {"steps", 8}},
                          json{{"kind", "adding"}, {"time_steps", 10}, {"steps", 10}}}) {
    testing::expect_error_mentions(
        [&] { make_task(old); },
        {"config task.steps: renamed to \"task.time_steps\" (the sequence length T)"});
  }
  EXPECT_EQ(make_task({{"kind", "adding"}, {"time_steps", 10}})->time_steps(), 10);
  EXPECT_NE(error_of({{"kind", "copy"}, {"delay", 3}, {"time_steps", 10}})
                .find("task.time_steps: unknown"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "copy"}, {"delay", 3}, {"steps", 10}}).find("task.steps: unknown"),
            std::string::npos);
}

// A stand-in Fashion-MNIST of 4 x 4 images (T = 16): image n's first pixel is n, so a
// batch's sequences say which images they are; labels n % 10 (two of each class in 20).
struct SmallFashionMnist {
  torch::Tensor train_images, train_labels, test_images, test_labels;
  std::string folder;
};

torch::Tensor numbered_images(int64_t count, int64_t offset) {
  auto images = (torch::arange(count * 16, torch::kLong) * 37 + offset).remainder(256)
                    .view({count, 4, 4});  // [N, 4, 4]
  images.select(1, 0).select(1, 0).copy_(torch::arange(count, torch::kLong) + offset);
  return images.to(torch::kUInt8);
}

SmallFashionMnist small_fashion_mnist(const std::string& name) {
  SmallFashionMnist d;
  d.train_images = numbered_images(20, 0);
  d.train_labels = (torch::arange(20, torch::kLong) % 10).to(torch::kUInt8);
  d.test_images = numbered_images(10, 100);
  d.test_labels = (torch::arange(10, torch::kLong) * 3 % 10).to(torch::kUInt8);
  d.folder = testing::write_fashion_mnist_folder(name, d.train_images, d.train_labels,
                                                 d.test_images, d.test_labels);
  return d;
}

// Undoes the standardisation: the pixel values 0..255 of a batch's inputs [T, B, 1].
torch::Tensor pixel_values(const SequenceBatch& batch, const torch::Tensor& train_images) {
  const auto scaled = train_images.to(torch::kFloat) / 255.0;
  return ((batch.inputs.squeeze(-1) * scaled.std() + scaled.mean()) * 255.0).round()
      .to(torch::kLong);  // [T, B]
}

TEST(Tasks, FashionMnistReadsEachImagePixelByPixelAndScoresItsClassAtTheEnd) {
  const auto data = small_fashion_mnist("fmnist_shapes");
  const auto task = make_task({{"kind", "fashion_mnist"}, {"path", data.folder}});
  EXPECT_EQ(task->time_steps(), 16);
  EXPECT_EQ(task->input_size(), 1);
  EXPECT_EQ(task->head_kind(), "ce");
  EXPECT_EQ(task->head_outputs(), 10);
  EXPECT_TRUE(task->classifies_sequences());
  EXPECT_NEAR(task->chance_loss(), std::log(10.0), 1e-12);  // balanced labels
  for (const auto split : {Split::kTrain, Split::kEval}) {
    const auto& images = split == Split::kTrain ? data.train_images : data.test_images;
    const auto& labels = split == Split::kTrain ? data.train_labels : data.test_labels;
    const int64_t offset = split == Split::kTrain ? 0 : 100;
    const auto batch = task->batch(split, 3, 8, 1);
    EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{16, 8, 1}));
    EXPECT_EQ(batch.targets.sizes(), (std::vector<int64_t>{16, 8}));
    EXPECT_FALSE(batch.has_lengths());
    EXPECT_EQ(scored_steps(batch), 8);
    EXPECT_EQ(batch.targets.slice(0, 0, 15).max().item<int64_t>(), kNoTarget);
    const auto pixels = pixel_values(batch, data.train_images);  // [T, B]
    for (int64_t b = 0; b < 8; ++b) {
      const int64_t n = pixels[0][b].item<int64_t>() - offset;  // which image
      ASSERT_TRUE(n >= 0 && n < images.size(0)) << "sequence " << b << " is no image";
      EXPECT_TRUE(torch::equal(pixels.select(1, b), images[n].reshape(-1).to(torch::kLong)))
          << "sequence " << b << " is not image " << n << " in row-major order";
      EXPECT_EQ(batch.targets[15][b].item<int64_t>(), labels[n].item<int64_t>());
    }
  }
  // Standardised with the training images' statistics.
  const auto all = task->batch(Split::kTrain, 0, 4000, 2).inputs;
  EXPECT_NEAR(all.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(all.std().item<double>(), 1.0, 0.05);
}

// The permuted task reads pixel order[t] at step t, the same order in every run; the same
// seed and index pick the same images as the sequential task.
TEST(Tasks, PermutedFashionMnistReadsThePixelsInOneFixedOrder) {
  const auto order = pixel_permutation(784);
  EXPECT_EQ(order, pixel_permutation(784));
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(784);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  int64_t fixed_points = 0;
  for (int64_t t = 0; t < 784; ++t) fixed_points += order[t] == t;
  EXPECT_LT(fixed_points, 10);  // a shuffle, not the identity
  // Pinned: results of permuted runs are comparable across versions only while it holds.
  EXPECT_EQ((std::vector<int64_t>(order.begin(), order.begin() + 6)),
            (std::vector<int64_t>{14, 421, 560, 728, 770, 107}));

  const auto data = small_fashion_mnist("fmnist_permuted");
  const auto sequential = make_task({{"kind", "fashion_mnist"}, {"path", data.folder}});
  const auto permuted = make_task({{"kind", "fashion_mnist"}, {"path", data.folder},
                                   {"permuted", true}});
  EXPECT_NE(permuted->describe().find("permuted"), std::string::npos);
  const auto a = sequential->batch(Split::kTrain, 2, 6, 5);
  const auto b = permuted->batch(Split::kTrain, 2, 6, 5);
  const auto order16 = torch::tensor(pixel_permutation(16), torch::kLong);
  EXPECT_TRUE(torch::equal(b.inputs, a.inputs.index_select(0, order16)));
  EXPECT_TRUE(torch::equal(b.targets, a.targets));
  EXPECT_FALSE(torch::equal(b.inputs, a.inputs));
}

TEST(Tasks, AMissingFashionMnistNamesThePackageAndThePath) {
  const auto empty = ::testing::TempDir() + "/vlrnn_fmnist_missing";
  std::filesystem::remove_all(empty);
  std::filesystem::create_directories(empty);
  for (const auto& path : {empty, std::string("/no/such/folder")}) {
    testing::expect_error_mentions(
        [&] { make_task({{"kind", "fashion_mnist"}, {"path", path}}); },
        {"task.path", "\"" + path + "\"", "train-images-idx3-ubyte.gz",
         "apt-get install dataset-fashion-mnist"});
  }
  // One of the four files gone, or holding the wrong thing.
  const auto data = small_fashion_mnist("fmnist_broken");
  std::filesystem::remove(data.folder + "/t10k-labels-idx1-ubyte");
  testing::expect_error_mentions(
      [&] { make_task({{"kind", "fashion_mnist"}, {"path", data.folder}}); },
      {"lacks t10k-labels-idx1-ubyte.gz", data.folder});
  testing::write_file(data.folder + "/t10k-labels-idx1-ubyte",
                      testing::idx_bytes(torch::zeros({9}, torch::kUInt8)));
  testing::expect_error_mentions(
      [&] { make_task({{"kind", "fashion_mnist"}, {"path", data.folder}}); },
      {"t10k-labels-idx1-ubyte", "expected [10] (one label per image)"});
  testing::write_file(data.folder + "/t10k-labels-idx1-ubyte",
                      testing::idx_bytes(torch::full({10}, 10, torch::kUInt8)));
  testing::expect_error_mentions(
      [&] { make_task({{"kind", "fashion_mnist"}, {"path", data.folder}}); },
      {"holds label 10", "expected classes 0..9"});
  testing::write_file(data.folder + "/train-images-idx3-ubyte",
                      testing::idx_bytes(torch::zeros({20, 16}, torch::kUInt8)));
  testing::expect_error_mentions(
      [&] { make_task({{"kind", "fashion_mnist"}, {"path", data.folder}}); },
      {"train-images-idx3-ubyte", "expected images [N, rows, columns]"});
}

// The data set as Debian installs it (dataset-fashion-mnist, gzip-compressed).
TEST(Tasks, TheInstalledFashionMnistHas60000TrainingAnd10000TestImages) {
  if (!std::filesystem::exists(std::string(kFashionMnistFolder) + "/" + kFashionMnistFiles[0] +
                               ".gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const auto task = make_task({{"kind", "fashion_mnist"}});
  EXPECT_EQ(task->time_steps(), 784);
  EXPECT_NEAR(task->chance_loss(), std::log(10.0), 1e-12);  // 6000 images of each class
  const auto batch = task->batch(Split::kEval, 0, 16, 0);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{784, 16, 1}));
  EXPECT_EQ(scored_steps(batch), 16);
}

}  // namespace
}  // namespace vlrnn::experiments
