// Umbrella header for plugin authors: the C ABI plus every C++ helper.
#pragma once

#include <headway/abi.h>

#include <headway/sdk/engine_choice.hpp>
#include <headway/sdk/export.hpp>
#include <headway/sdk/host.hpp>
#include <headway/sdk/kv_transport.hpp>
#include <headway/sdk/model.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/prefix_affinity.hpp>
#include <headway/sdk/router.hpp>
#include <headway/sdk/scheduler.hpp>
#include <headway/sdk/status.hpp>
