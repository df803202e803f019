# The API test server reads selectors, lists its built-in resources and keeps object metadata
# with code of its own, so that it and kube/'s client stay two independent readings of the
# fixtures (issue 18). Fails naming the file and the line when a server source includes kube/'s
# object or resource helpers or calls them again. Run as a ctest:
#   cmake -DSUPPORT_DIR=<tests/support> -P check_server_sources.cmake
# Not server sources: the process kubelet and TestCluster, which are clients of the server.
file(GLOB sources ${SUPPORT_DIR}/*.h ${SUPPORT_DIR}/*.cpp)
list(FILTER sources EXCLUDE REGEX "/(process_kubelet|test_cluster)[^/]*$")
set(forbidden
  "#include \"kube/(object|resource)\\.h\""
  "kube::(builtin_resources|ResourceRegistry|ResourceInfo|GroupVersionResource|parse_api_resource_list|parse_custom_resource_definition)"
  "kube::(LabelSelector|FieldSelector|LabelRequirement|FieldRequirement|SelectorOperator)"
  "kube::(object_finalizers|has_finalizer|add_finalizer|remove_finalizer|is_being_deleted|get_annotation|set_annotation|object_name|object_namespace|object_uid|format_rfc3339)")
set(found "")
foreach(source ${sources})
  file(STRINGS ${source} lines)
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    foreach(pattern ${forbidden})
      if(line MATCHES "${pattern}")
        get_filename_component(name ${source} NAME)
        string(APPEND found "\n  tests/support/${name}:${number}: ${CMAKE_MATCH_0}")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH sources count)
if(count LESS 50)
  message(FATAL_ERROR "found only ${count} server sources under ${SUPPORT_DIR}")
endif()
if(found)
  message(FATAL_ERROR "the API test server uses kube/'s client helpers:${found}")
endif()
message(STATUS "${count} server sources, none using kube/'s selector, resource or object helpers")
