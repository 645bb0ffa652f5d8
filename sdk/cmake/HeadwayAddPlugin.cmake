# headway_add_plugin(<name> SOURCES <files...> [LIBRARIES <targets...>] [OUTPUT_DIRECTORY <dir>])
#
# Builds a Headway plugin: a shared library (MODULE) against HeadwaySDK::sdk with hidden symbols, C
# and C++ sources alike, so the only exported symbol is headway_plugin_entry. Used in-tree and by
# out-of-tree plugins alike.
include_guard(GLOBAL)

function(headway_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "headway_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE HeadwaySDK::sdk ${ARG_LIBRARIES})
  target_compile_features(${name} PRIVATE cxx_std_20)
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED HEADWAY_PLUGIN_OUTPUT_DIR)
    # In-tree plugin: next to the CLI in the build tree, under lib/headway/plugins when installed.
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${HEADWAY_PLUGIN_OUTPUT_DIR})
    install(TARGETS ${name} LIBRARY DESTINATION lib/headway/plugins COMPONENT runtime)
  endif()
  if(NOT APPLE)
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()
