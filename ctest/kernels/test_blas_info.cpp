// BLAS and CPU detection (paraxis/kernels/blas_info.hpp): the generic-core warning on
// hand-written cases, the /proc/cpuinfo parser on a hand-written file, and the detected values
// being stated (never empty) on whatever machine runs the test.
#include "paraxis/kernels/blas_info.hpp"

#include <gtest/gtest.h>

namespace pk = paraxis::kernels;

namespace {

const std::vector<std::string> kAvx512 = {"fpu",     "sse2",     "avx",      "avx2",    "fma",
                                          "avx512f", "avx512bw", "avx512dq", "avx512vl"};
// AVX-512 without BW, DQ and VL (Knights Landing): OpenBLAS's SkylakeX kernels do not run there.
const std::vector<std::string> kAvx512FOnly = {"fpu", "sse2", "avx", "avx2", "fma", "avx512f"};
const std::vector<std::string> kAvx2 = {"fpu", "sse2", "avx", "avx2", "fma"};
const std::vector<std::string> kSseOnly = {"fpu", "sse", "sse2", "ssse3", "sse4_2"};

}  // namespace

TEST(BlasCoreWarning, GenericCoreOnAvx512NamesSkylakeX) {
  const auto w = pk::blas_core_warning("Prescott", kAvx512);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *w;
  EXPECT_NE(w->find("Prescott"), std::string::npos) << *w;
  EXPECT_NE(w->find("avx512f"), std::string::npos) << *w;
}

TEST(BlasCoreWarning, GenericCoreOnAvx2NamesHaswell) {
  for (const char* core : {"Core2", "Katmai", "Generic", "Nehalem", "prescott"}) {
    const auto w = pk::blas_core_warning(core, kAvx2);
    ASSERT_TRUE(w.has_value()) << core;
    EXPECT_NE(w->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *w;
    EXPECT_EQ(w->find("SkylakeX"), std::string::npos) << *w;
  }
}

TEST(BlasCoreWarning, Avx2CoreOnAvx512NamesSkylakeX) {
  // OpenBLAS 0.3.21 reports "Haswell" on a Zen 5 VM and "Zen" on Zen 4: AVX2 kernels, at about
  // half of what SkylakeX's reach there (docs/performance.md).
  for (const char* core : {"Haswell", "Zen", "Excavator", "SandyBridge"}) {
    const auto w = pk::blas_core_warning(core, kAvx512);
    ASSERT_TRUE(w.has_value()) << core;
    EXPECT_NE(w->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *w;
    EXPECT_NE(w->find(core), std::string::npos) << *w;
    EXPECT_EQ(w->find("generic"), std::string::npos) << *w;
  }
  const auto w = pk::blas_core_warning("Haswell", kAvx512);
  EXPECT_NE(w->find("(AVX2)"), std::string::npos) << *w;
}

TEST(BlasCoreWarning, AvxCoreOnAvx2NamesHaswell) {
  const auto w = pk::blas_core_warning("Sandybridge", kAvx2);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *w;
  EXPECT_NE(w->find("(AVX)"), std::string::npos) << *w;
}

TEST(BlasCoreWarning, NoSkylakeXWithoutAvx512BwDqVl) {
  EXPECT_FALSE(pk::blas_core_warning("Haswell", kAvx512FOnly).has_value());
  const auto w = pk::blas_core_warning("Prescott", kAvx512FOnly);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *w;
}

TEST(BlasCoreWarning, NoWarningWhenTheCoreSuitsTheCpu) {
  EXPECT_FALSE(pk::blas_core_warning("CooperLake", kAvx512).has_value());
  EXPECT_FALSE(pk::blas_core_warning("SapphireRapids", kAvx512).has_value());
  EXPECT_FALSE(pk::blas_core_warning("Haswell", kAvx2).has_value());
  EXPECT_FALSE(pk::blas_core_warning("SkylakeX", kAvx512).has_value());
  EXPECT_FALSE(pk::blas_core_warning("Zen", kAvx2).has_value());
}

TEST(BlasCoreWarning, NoWarningForGenericCoreOnCpuWithoutAvx) {
  EXPECT_FALSE(pk::blas_core_warning("Prescott", kSseOnly).has_value());
  EXPECT_FALSE(pk::blas_core_warning("Core2", {}).has_value());
}

TEST(BlasCoreWarning, NoWarningWhenTheCoreIsNotKnown) {
  // MKL, BLIS or no BLAS: the core cannot be read, so nothing is claimed about it.
  EXPECT_FALSE(pk::blas_core_warning("unknown (MKL selects its code path per call)", kAvx512));
  EXPECT_FALSE(pk::blas_core_warning("none", kAvx512).has_value());
}

TEST(CpuInfo, ParsesTheFirstProcessorBlock) {
  const std::string text =
      "processor\t: 0\n"
      "vendor_id\t: GenuineIntel\n"
      "cpu family\t: 6\n"
      "model\t\t: 143\n"
      "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
      "flags\t\t: fpu sse2 avx avx2 avx512f\n"
      "\n"
      "processor\t: 1\n"
      "cpu family\t: 99\n"
      "model\t\t: 98\n"
      "model name\t: other\n"
      "flags\t\t: fpu\n";
  const pk::CpuInfo cpu = pk::parse_cpuinfo(text);
  EXPECT_EQ(cpu.model_name, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(cpu.family, 6);
  EXPECT_EQ(cpu.model, 143);
  EXPECT_EQ(cpu.flags, (std::vector<std::string>{"fpu", "sse2", "avx", "avx2", "avx512f"}));
  EXPECT_EQ(pk::cpu_model_string(cpu), "Intel(R) Xeon(R) Platinum 8480+ (family 6, model 143)");
}

TEST(CpuInfo, MissingFieldsStayUnset) {
  const pk::CpuInfo cpu = pk::parse_cpuinfo("processor : 0\nBogoMIPS : 50.00\n");
  EXPECT_TRUE(cpu.model_name.empty());
  EXPECT_EQ(cpu.family, -1);
  EXPECT_EQ(cpu.model, -1);
  EXPECT_TRUE(cpu.flags.empty());
  EXPECT_EQ(pk::cpu_model_string(cpu), "");
}

TEST(Detection, StatesTheBlasAndCpuOfThisProcess) {
  const pk::BlasInfo blas = pk::detect_blas();
  EXPECT_FALSE(blas.library.empty());
  EXPECT_FALSE(blas.core.empty());
  // An OpenBLAS reports its version first ("OpenBLAS 0.3.21 ..."), and a core it chose.
  if (blas.library.rfind("OpenBLAS", 0) == 0) {
    EXPECT_GT(blas.library.size(), std::string("OpenBLAS ").size());
    EXPECT_EQ(blas.core.find("unknown"), std::string::npos) << blas.core;
  }
  EXPECT_FALSE(pk::cpu_model_string(pk::detect_cpu()).empty());
}
