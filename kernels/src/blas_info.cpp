// Detection of the process's BLAS (through dlsym, so what is reported is what is loaded, not
// what the build expected) and of the CPU (/proc/cpuinfo), and the rule that flags a BLAS
// running kernels narrower than the CPU's vector units. See paraxis/kernels/blas_info.hpp.
#include "paraxis/kernels/blas_info.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace paraxis::kernels {

namespace {

void* symbol(const char* name) {
  return dlsym(RTLD_DEFAULT, name);
}

std::string trimmed(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The library file a symbol was found in (for a BLAS without a query function).
std::string library_of(void* sym) {
  Dl_info info{};
  if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  return "an unnamed object";
}

// The widest vector instructions an OpenBLAS core's kernels use (core names of its
// driver/others/dynamic.c), -1 for a core not listed here (e.g. another BLAS's "unknown (...)").
// 0: SSE only ("Unknown"/"Generic" are OpenBLAS's fallbacks); 1: AVX; 2: AVX2 with FMA;
// 3: AVX-512.
int core_vector_tier(const std::string& core) {
  static const std::pair<const char*, int> cores[] = {
      {"unknown", 0},    {"generic", 0},     {"katmai", 0},       {"coppermine", 0},
      {"northwood", 0},  {"prescott", 0},    {"banias", 0},       {"atom", 0},
      {"core2", 0},      {"penryn", 0},      {"dunnington", 0},   {"nehalem", 0},
      {"athlon", 0},     {"opteron", 0},     {"opteron_sse3", 0}, {"barcelona", 0},
      {"nano", 0},       {"bobcat", 0},      {"sandybridge", 1},  {"bulldozer", 1},
      {"piledriver", 1}, {"steamroller", 1}, {"haswell", 2},      {"zen", 2},
      {"excavator", 2},  {"skylakex", 3},    {"cooperlake", 3},   {"sapphirerapids", 3}};
  const std::string c = lower(trimmed(core));
  for (const auto& [name, tier] : cores)
    if (c == name) return tier;
  return -1;
}

bool has_flag(const std::vector<std::string>& flags, const char* f) {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

}  // namespace

BlasInfo detect_blas() {
  using cstr_fn = char* (*)();
  if (void* cfg = symbol("openblas_get_config")) {
    BlasInfo info{trimmed(reinterpret_cast<cstr_fn>(cfg)()), ""};
    if (void* core = symbol("openblas_get_corename"))
      info.core = trimmed(reinterpret_cast<cstr_fn>(core)());
    else
      info.core = "unknown (this OpenBLAS has no openblas_get_corename)";
    return info;
  }
  if (void* mkl = symbol("mkl_get_version_string")) {
    char buf[256] = {};
    reinterpret_cast<void (*)(char*, int)>(mkl)(buf, static_cast<int>(sizeof(buf)));
    return {"MKL " + trimmed(buf), "unknown (MKL selects its code path per call)"};
  }
  if (void* blis = symbol("bli_info_get_version_str")) {
    return {std::string("BLIS ") + reinterpret_cast<cstr_fn>(blis)(),
            "unknown (BLIS architecture query not read)"};
  }
  void* sgemm = symbol("sgemm_");
  if (sgemm == nullptr) sgemm = symbol("cblas_sgemm");
  if (sgemm != nullptr)
    return {"unknown (sgemm from " + library_of(sgemm) +
                "; no OpenBLAS, MKL or BLIS query function in the process)",
            "unknown"};
  return {"none (no BLAS loaded in this process)", "none"};
}

CpuInfo parse_cpuinfo(const std::string& text) {
  CpuInfo cpu;
  std::istringstream in(text);
  std::string line;
  bool seen_processor = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trimmed(line.substr(0, colon));
    const std::string value = trimmed(line.substr(colon + 1));
    if (key == "processor") {
      if (seen_processor) break;  // the first processor's block is enough
      seen_processor = true;
    } else if (key == "model name" && cpu.model_name.empty()) {
      cpu.model_name = value;
    } else if (key == "cpu family" && cpu.family < 0) {
      cpu.family = std::atoi(value.c_str());
    } else if (key == "model" && cpu.model < 0) {
      cpu.model = std::atoi(value.c_str());
    } else if ((key == "flags" || key == "Features") && cpu.flags.empty()) {
      std::istringstream fs(value);
      for (std::string f; fs >> f;) cpu.flags.push_back(f);
    }
  }
  return cpu;
}

CpuInfo detect_cpu() {
  std::ifstream f("/proc/cpuinfo");
  if (!f) {
    CpuInfo cpu;
    cpu.model_name = "unknown (/proc/cpuinfo not readable)";
    return cpu;
  }
  std::ostringstream text;
  text << f.rdbuf();
  CpuInfo cpu = parse_cpuinfo(text.str());
  if (cpu.model_name.empty()) cpu.model_name = "unknown (no \"model name\" in /proc/cpuinfo)";
  return cpu;
}

std::string cpu_model_string(const CpuInfo& cpu) {
  std::string s = cpu.model_name;
  if (cpu.family >= 0 || cpu.model >= 0)
    s += " (family " + std::to_string(cpu.family) + ", model " + std::to_string(cpu.model) + ")";
  return s;
}

std::optional<std::string> blas_core_warning(const std::string& core,
                                             const std::vector<std::string>& cpu_flags) {
  const int tier = core_vector_tier(core);
  if (tier < 0) return std::nullopt;  // not an OpenBLAS core name: nothing is claimed
  // The CPU's widest kernels OpenBLAS has: SkylakeX's need AVX-512 F, BW, DQ and VL (AVX-512
  // CPUs since Skylake-SP, AMD since Zen 4; a summary recorded before BW, DQ and VL were is
  // taken as AVX2); Haswell's AVX2 (with FMA, as every AVX2 CPU has).
  const bool avx512 = has_flag(cpu_flags, "avx512f") && has_flag(cpu_flags, "avx512bw") &&
                      has_flag(cpu_flags, "avx512dq") && has_flag(cpu_flags, "avx512vl");
  const int cpu = avx512 ? 3 : has_flag(cpu_flags, "avx2") ? 2 : 0;
  if (tier >= cpu) return std::nullopt;
  const std::string wide = cpu == 3 ? "AVX-512 (avx512f)" : "AVX2 (avx2)";
  const std::string fix = cpu == 3 ? "SkylakeX" : "Haswell";
  const std::string figures =
      ": every BLAS figure (the OpenBLAS baseline, the vendor GEMM path, the calibrated compute) "
      "is ";
  if (tier == 0)
    return "the BLAS runs its generic \"" + trimmed(core) + "\" kernels on a CPU with " + wide +
           figures + "several times below this CPU's; rerun with OPENBLAS_CORETYPE=" + fix;
  // Measured for AVX2 kernels on an AVX-512 CPU (docs/performance.md); AVX ones lose more.
  return "the BLAS runs its \"" + trimmed(core) + "\" kernels (" + (tier == 1 ? "AVX" : "AVX2") +
         ") on a CPU with " + wide + figures +
         (tier == 2 ? "about half of this CPU's (docs/performance.md)" : "below this CPU's") +
         "; rerun with OPENBLAS_CORETYPE=" + fix;
}

std::optional<std::string> detected_blas_core_warning() {
  return blas_core_warning(detect_blas().core, detect_cpu().flags);
}

int blas_threads() {
  using get_fn = int (*)();
  for (const char* name : {"openblas_get_num_threads", "mkl_get_max_threads"})
    if (void* f = symbol(name)) return reinterpret_cast<get_fn>(f)();
  if (void* f = symbol("bli_thread_get_num_threads"))
    return static_cast<int>(reinterpret_cast<long (*)()>(f)());
  return -1;
}

bool set_blas_threads(int n) {
  if (n < 1) n = 1;
  if (void* f = symbol("openblas_set_num_threads")) {
    reinterpret_cast<void (*)(int)>(f)(n);
    return true;
  }
  if (void* f = symbol("mkl_set_num_threads")) {
    reinterpret_cast<void (*)(int)>(f)(n);
    return true;
  }
  if (void* f = symbol("bli_thread_set_num_threads")) {
    reinterpret_cast<void (*)(long)>(f)(n);
    return true;
  }
  return false;
}

std::string blas_threads_from_environment() {
  for (const char* name :
       {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0')
      return std::string(name) + "=" + v;
  return "";
}

}  // namespace paraxis::kernels
