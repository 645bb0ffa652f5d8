# SLOs, the comparison table, the seed sweep and the capacity search (headway simulate --slo,
# several --config, --seeds, --find-capacity); included from tests/unit/core/CMakeLists.txt.
headway_add_test(slo_test SOURCES slo_test.cpp)
headway_add_test(comparison_table_test SOURCES comparison_table_test.cpp)
headway_add_test(seed_sweep_test SOURCES seed_sweep_test.cpp)
headway_add_test(engine_usage_test SOURCES engine_usage_test.cpp)
headway_add_test(queue_growth_test SOURCES queue_growth_test.cpp)
# Parses a deployment with the real sim model, router and transport.
add_dependencies(engine_usage_test ${HEADWAY_REAL_PLUGIN_TARGETS})
headway_add_test(capacity_search_test SOURCES capacity_search_test.cpp)
# The simulated capacity search loads the real sim model, chunked scheduler and single router.
add_dependencies(capacity_search_test headway_model_sim headway_scheduler_chunked
                 headway_router_single)
