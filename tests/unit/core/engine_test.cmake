# core::Engine with the real sim model and chunked scheduler, and a broken test scheduler; included
# from tests/unit/core/CMakeLists.txt.
headway_add_test(engine_test SOURCES engine_test.cpp)
add_dependencies(engine_test headway_model_sim headway_scheduler_chunked headway_router_single
                 test_over_budget_scheduler)
