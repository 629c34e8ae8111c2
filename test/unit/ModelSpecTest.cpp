//===- ModelSpecTest.cpp - Import and parameter counts --------------------===//

#include "compiler/Analysis/ModelStats.h"
#include "compiler/Import/GraphBuilder.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace partita;

namespace {

const std::string kExamples = PARTITA_EXAMPLES_DIR;

std::string errorText(llvm::Error error) {
  std::string text;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
    text = e.message();
  });
  return text;
}

ModelStats statsOf(const ModelSpec &spec) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildModelModule(spec, context);
  EXPECT_TRUE(module);
  tfm::ModelOp model;
  module->walk([&](tfm::ModelOp op) { model = op; });
  return computeModelStats(model);
}

struct Expected {
  const char *file;
  int64_t parameters;
};

// Published parameter counts of the real models; the tiny ones are checked
// against the closed forms in the next test.
class ExampleCount : public testing::TestWithParam<Expected> {};

TEST_P(ExampleCount, MatchesTheRealModel) {
  auto spec = readModelSpecFile(kExamples + "/models/" + GetParam().file, {});
  ASSERT_TRUE(bool(spec)) << errorText(spec.takeError());
  EXPECT_EQ(statsOf(*spec).numParameters, GetParam().parameters);
}

std::string exampleName(const testing::TestParamInfo<Expected> &info) {
  std::string name = llvm::StringRef(info.param.file).drop_back(5).str();
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Examples, ExampleCount,
    testing::Values(Expected{"gpt2.json", 124439808},
                    Expected{"gpt3-175b.json", 174604259328},
                    Expected{"llama2-7b.json", 6738415616},
                    Expected{"llama2-70b.json", 68976648192},
                    Expected{"llama3-8b.json", 8030261248},
                    Expected{"llama3-70b.json", 70553706496},
                    Expected{"llama3-405b.json", 405853388800},
                    Expected{"mistral-7b.json", 7241732096},
                    Expected{"qwen2-7b.json", 7615616512},
                    Expected{"gpt-neox-20b.json", 20554567680},
                    Expected{"gemma-7b.json", 8537680896},
                    Expected{"olmo2-7b.json", 7298617344},
                    Expected{"tiny-llama.json", 164160},
                    Expected{"tiny-gpt2.json", 35712},
                    Expected{"tiny-neox.json", 149248},
                    // V=512 H=64 L=2, 4 heads of 32 and 1 kv head, F=192,
                    // GeGLU, tied: 512*64 + 2*(64*(128+32+32) + 128*64 +
                    // 3*64*192 + 2*64) + 64.
                    Expected{"tiny-gemma.json", 147776}),
    exampleName);

TEST(ModelSpec, TinyCountsFollowTheClosedForms) {
  // tiny-llama: V=512 H=64 L=2 heads=4 kv=2 (hd=16) F=192, untied.
  int64_t h = 64, kv = 2 * 16, f = 192, v = 512;
  int64_t llamaLayer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h;
  EXPECT_EQ(2 * v * h + 2 * llamaLayer + h, 164160);
  // tiny-gpt2: V=256 H=32 L=2 F=128 P=64, all biases, tied.
  h = 32, f = 128, v = 256;
  int64_t gptLayer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  EXPECT_EQ(v * h + 64 * h + 2 * gptLayer + 2 * h, 35712);
  // tiny-neox: V=384 H=64 L=2 F=256, all biases, untied.
  h = 64, f = 256, v = 384;
  int64_t neoxLayer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
  EXPECT_EQ(2 * v * h + 2 * neoxLayer + 2 * h, 149248);
}

TEST(ModelSpec, SpecKeysOverrideTheHFConfig) {
  std::string text = R"({
    "version": 1, "name": "short-llama",
    "model": {"hf_config": "../hf/llama-3-8b/config.json", "num_layers": 2},
    "training": {"seq_len": 512, "global_batch": 4}
  })";
  auto spec = readModelSpec(text, "short.json", kExamples + "/models", {});
  ASSERT_TRUE(bool(spec)) << errorText(spec.takeError());
  ModelStats stats = statsOf(*spec);
  EXPECT_EQ(stats.numBlocks, 2);
  // Two of Llama-3-8B's 32 identical layers plus its embeddings and norm.
  EXPECT_EQ(stats.numParameters,
            2 * 218112000 + 2 * int64_t(128256) * 4096 + 4096);
  EXPECT_EQ(spec->model.architecture, "LlamaForCausalLM");
}

TEST(ModelSpec, CommandLineOverridesTraining) {
  TrainingOverrides overrides;
  overrides.seqLen = 64;
  overrides.globalBatch = 3;
  overrides.dtype = "f16";
  auto spec =
      readModelSpecFile(kExamples + "/models/tiny-llama.json", overrides);
  ASSERT_TRUE(bool(spec)) << errorText(spec.takeError());
  EXPECT_EQ(spec->training.seqLen, 64);
  EXPECT_EQ(spec->training.globalBatch, 3);
  EXPECT_EQ(spec->training.dtype, DType::F16);
}

TEST(ModelSpec, HFConfigNeedsTrainingSettings) {
  auto spec = readModelSpecFile(kExamples + "/hf/gpt2/config.json", {});
  ASSERT_FALSE(bool(spec));
  std::string text = errorText(spec.takeError());
  EXPECT_NE(text.find("seq_len is missing"), std::string::npos) << text;
  EXPECT_NE(text.find("--global-batch"), std::string::npos) << text;
}

TEST(ModelSpec, PartialRotaryAndParallelResidual) {
  TrainingOverrides overrides;
  overrides.seqLen = 2048;
  overrides.globalBatch = 8;
  auto spec =
      readModelSpecFile(kExamples + "/hf/gpt-neox-20b/config.json", overrides);
  ASSERT_TRUE(bool(spec)) << errorText(spec.takeError());
  EXPECT_EQ(spec->model.rotaryDim(), 24); // 25% of head_dim 96
  EXPECT_TRUE(spec->model.parallelResidual);
  EXPECT_EQ(spec->model.activation, Activation::GeluTanh); // "gelu_fast"
}

TEST(ModelSpec, GemmaDefaults) {
  // HF's GemmaConfig defaults for what a config leaves out.
  std::string text = R"({"architectures": ["GemmaForCausalLM"],
    "vocab_size": 100, "hidden_size": 2304, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 16})";
  TrainingOverrides overrides;
  overrides.seqLen = 16;
  overrides.globalBatch = 2;
  auto spec = readModelSpec(text, "config.json", "", overrides);
  ASSERT_TRUE(bool(spec)) << errorText(spec.takeError());
  const ModelConfig &m = spec->model;
  EXPECT_EQ(m.kvHeads(), 16);
  EXPECT_EQ(m.headDimension(), 256);
  EXPECT_EQ(m.activation, Activation::GeGluTanh);
  EXPECT_TRUE(m.tieEmbeddings);
  EXPECT_TRUE(m.normUnitOffset);
  EXPECT_FALSE(m.mlpBias || m.qkvBias || m.attnOutBias);
  EXPECT_DOUBLE_EQ(m.normEps, 1e-6);
  EXPECT_DOUBLE_EQ(m.embeddingMultiplier(), 48.0); // sqrt(2304)
}

TEST(ModelSpec, CrossFieldErrorsNameTheSourceKey) {
  std::string text = R"({"architectures": ["LlamaForCausalLM"],
    "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 6,
    "num_key_value_heads": 4})";
  TrainingOverrides overrides;
  overrides.seqLen = 16;
  overrides.globalBatch = 2;
  auto spec = readModelSpec(text, "config.json", "", overrides);
  ASSERT_FALSE(bool(spec));
  std::string message = errorText(spec.takeError());
  EXPECT_NE(message.find("config.json: /num_attention_heads: num_heads 6 does "
                         "not divide hidden_size 64"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("config.json: /num_key_value_heads: num_kv_heads 4 "
                         "does not divide num_heads 6"),
            std::string::npos)
      << message;
}

} // namespace
