# Cost of one partial_prefill scheduler step (Google Benchmark; run by hand). Included from
# tests/benchmarks/CMakeLists.txt.
add_executable(partial_prefill_benchmark ${CMAKE_CURRENT_LIST_DIR}/partial_prefill_benchmark.cpp)
target_link_libraries(partial_prefill_benchmark PRIVATE headway_core benchmark::benchmark
  tomlplusplus::tomlplusplus)
target_compile_definitions(partial_prefill_benchmark PRIVATE
  HEADWAY_SOURCE_DIR="${PROJECT_SOURCE_DIR}" HEADWAY_PLUGIN_DIR="${HEADWAY_PLUGIN_OUTPUT_DIR}")
add_dependencies(partial_prefill_benchmark headway_scheduler_partial_prefill)
