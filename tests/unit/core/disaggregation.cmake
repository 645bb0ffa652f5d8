# Prefill/decode disaggregation and length routing end to end: core::Cluster and core::simulate
# with the sim model, the chunked scheduler, the disaggregated / length / least_loaded routers and
# the host_copy KV transport (and a failing one). Included from tests/unit/core/CMakeLists.txt.
headway_add_test(disaggregation_test SOURCES disaggregation_test.cpp
                 LIBRARIES nlohmann_json::nlohmann_json)
add_dependencies(disaggregation_test headway_model_sim headway_scheduler_chunked
                 headway_router_disaggregated headway_router_length headway_router_least_loaded
                 headway_kv_transport_host_copy test_failing_transport test_id_blind_model
                 test_metrics_router)
