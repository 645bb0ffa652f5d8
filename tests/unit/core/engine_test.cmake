# core::Engine with the real sim model and chunked scheduler, and a broken test scheduler; included
# from tests/unit/core/CMakeLists.txt.
headway_add_test(engine_test SOURCES engine_test.cpp LIBRARIES spdlog::spdlog)
add_dependencies(engine_test headway_model_sim headway_scheduler_chunked
                 headway_scheduler_partial_prefill headway_router_single
                 test_over_budget_scheduler test_preempt_only_scheduler test_unbounded_scheduler
                 test_livelocking_scheduler
                 test_nan_logits_model)
# Steady-state steps allocate nothing: a binary of its own, since it replaces the global operator
# new to count allocations. It runs the cpu model on OpenMP threads, hence no leak checking
# (tests/CMakeLists.txt); engine_test checks the same engine for leaks.
headway_add_test(engine_allocation_test SOURCES engine_allocation_test.cpp
                 LIBRARIES headway_cpu_checkpoint
                 ENVIRONMENT ${HEADWAY_OPENMP_TEST_ENVIRONMENT})
add_dependencies(engine_allocation_test headway_model_sim headway_model_cpu headway_scheduler_chunked
                 headway_scheduler_partial_prefill)
