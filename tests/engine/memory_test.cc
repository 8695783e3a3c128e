#include "engine/memory.h"

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(MemoryTest, CpuBackendAllocatesExactlyTheFormulaForEachOptimizerAndBatch) {
  OptimizerConfig sgd, momentum, adamw;
  momentum.momentum = 0.9f;
  adamw.kind = OptimizerKind::kAdamW;
  const ModelConfig model;  // 784-128-10
  for (const OptimizerConfig& opt : {sgd, momentum, adamw}) {
    for (int batch : {32, 256}) {
      SCOPED_TRACE(::testing::Message() << "slots " << opt.state_slots() << " batch " << batch);
      BackendOptions options;
      options.max_batch = batch;
      auto backend = CreateCpuBackend(InitModelState(model, opt, 1), opt, options);
      ASSERT_TRUE(backend.ok());
      const MemoryReport report = (*backend)->memory();
      const MemoryFormula formula = ComputeMemoryFormula(model, opt, batch);
      EXPECT_EQ(report.bytes(MemoryTag::kParameters), formula.parameters);
      EXPECT_EQ(report.bytes(MemoryTag::kGradients), formula.gradients);
      EXPECT_EQ(report.bytes(MemoryTag::kOptimizerState), formula.optimizer_state);
      EXPECT_EQ(report.bytes(MemoryTag::kActivations), formula.activations);
      EXPECT_EQ(report.bytes(MemoryTag::kInputBatches), 4 * batch * 784);
      // The figures worked by hand: 101,770 parameters.
      EXPECT_EQ(formula.parameters, 4 * 101770);
      EXPECT_EQ(formula.optimizer_state, 4 * 101770 * opt.state_slots());
      EXPECT_EQ(formula.activations, 2 * 4 * batch * (128 + 10));
      EXPECT_GE(report.total_peak, formula.total());
      const std::string text = FormatMemoryReport(report, formula);
      EXPECT_THAT(text, ::testing::HasSubstr("activations"));
      EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("MISMATCH")));
    }
  }
}

TEST(MemoryTest, LedgerTracksCurrentAndPeakPerTag) {
  MemoryLedger ledger;
  ledger.Add(MemoryTag::kWorkspace, 100);
  ledger.Add(MemoryTag::kParameters, 50);
  ledger.Remove(MemoryTag::kWorkspace, 100);
  const MemoryReport r = ledger.report();
  EXPECT_EQ(r.bytes(MemoryTag::kWorkspace), 0);
  EXPECT_EQ(r.peak_bytes[static_cast<int>(MemoryTag::kWorkspace)], 100);
  EXPECT_EQ(r.total_current, 50);
  EXPECT_EQ(r.total_peak, 150);
}

TEST(MemoryTest, ReportFlagsAFormulaMismatch) {
  MemoryReport r;
  MemoryFormula f;
  f.parameters = 8;
  EXPECT_THAT(FormatMemoryReport(r, f), ::testing::HasSubstr("MISMATCH"));
}

}  // namespace
}  // namespace sluice
