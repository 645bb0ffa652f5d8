# The CPU model benchmark (Google Benchmark); included from tests/benchmarks/CMakeLists.txt.
# It links oneDNN itself only to measure the sgemm ceiling; the host never links it.
find_package(OpenMP REQUIRED COMPONENTS CXX)
add_executable(cpu_model_benchmark ${CMAKE_CURRENT_LIST_DIR}/cpu_model_benchmark.cpp)
target_include_directories(cpu_model_benchmark PRIVATE
  ${PROJECT_SOURCE_DIR}/tests/unit/plugins/models/cpu ${HEADWAY_DNNL_INCLUDE_DIR})
target_link_libraries(cpu_model_benchmark PRIVATE headway_core headway_cpu_checkpoint
  benchmark::benchmark OpenMP::OpenMP_CXX ${HEADWAY_DNNL_LIBRARY})
target_compile_options(cpu_model_benchmark PRIVATE -O3 -march=${HEADWAY_CPU_MODEL_ARCH})
target_compile_definitions(cpu_model_benchmark PRIVATE
  HEADWAY_SOURCE_DIR="${PROJECT_SOURCE_DIR}" HEADWAY_PLUGIN_DIR="${HEADWAY_PLUGIN_OUTPUT_DIR}")
add_dependencies(cpu_model_benchmark headway_model_cpu headway_scheduler_chunked
  headway_router_single)
