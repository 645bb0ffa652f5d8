# `headway simulate` with several deployments, --slo, --find-capacity and --plot; included from
# tests/integration/CMakeLists.txt.
headway_add_test(compare_cli_test SOURCES compare_cli_test.cpp)
add_dependencies(compare_cli_test headway ${HEADWAY_REAL_PLUGINS})
