// The BLAS part of a run's provenance (provenance.cpp): the generic-kernel warning derived from
// the keys summary.json records (blas_core, cpu_vector_flags), stated by `paraxis run` and
// `paraxis report` alike. provenance_json itself is declared in results.hpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace paraxis::driver {

// paraxis::kernels::blas_core_warning of a provenance object's "blas_core" and
// "cpu_vector_flags"; nullopt when the core suits the CPU or a key is absent (a summary written
// before these keys existed).
std::optional<std::string> blas_warning_of(const nlohmann::json& provenance);

}  // namespace paraxis::driver
