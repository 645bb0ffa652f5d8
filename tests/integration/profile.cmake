# `headway profile` on a tiny real checkpoint, then `headway simulate` with a sim model that reads
# the fitted cost file; and the fit recovering known coefficients from a sim model. Included from
# tests/integration/CMakeLists.txt.
headway_add_test(profile_test SOURCES profile_test.cpp LIBRARIES tomlplusplus::tomlplusplus)
add_dependencies(profile_test headway headway_model_cpu headway_model_sim headway_scheduler_chunked
  headway_router_single)
