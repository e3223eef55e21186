// Detection of the process's BLAS (through dlsym, so what is reported is what is loaded, not
// what the build expected) and of the CPU (/proc/cpuinfo), and the rule that flags a BLAS
// running generic kernels on a CPU with wider vector units. See paraxis/kernels/blas_info.hpp.
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

// OpenBLAS core names (driver/others/dynamic.c) whose kernels use SSE only: on a CPU with AVX2
// or AVX-512 they run a fraction of its peak. "Unknown"/"Generic" are OpenBLAS's fallbacks.
bool is_generic_core(const std::string& core) {
  static const char* const generic[] = {
      "unknown", "generic", "katmai",       "coppermine", "northwood",  "prescott",
      "banias",  "atom",    "core2",        "penryn",     "dunnington", "nehalem",
      "athlon",  "opteron", "opteron_sse3", "barcelona",  "nano",       "bobcat"};
  const std::string c = lower(trimmed(core));
  return std::any_of(std::begin(generic), std::end(generic), [&](const char* g) { return c == g; });
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
  if (!is_generic_core(core)) return std::nullopt;
  const char* wide = nullptr;
  const char* fix = nullptr;
  if (has_flag(cpu_flags, "avx512f")) {
    wide = "AVX-512 (avx512f)";
    fix = "SkylakeX";
  } else if (has_flag(cpu_flags, "avx2")) {
    wide = "AVX2 (avx2)";
    fix = "Haswell";
  } else {
    return std::nullopt;
  }
  return "the BLAS runs its generic \"" + trimmed(core) + "\" kernels on a CPU with " + wide +
         ": every BLAS figure (the OpenBLAS baseline, the vendor GEMM path, the calibrated "
         "compute) is several times below this CPU's; rerun with OPENBLAS_CORETYPE=" +
         fix;
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
