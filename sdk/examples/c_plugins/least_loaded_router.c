/* A router in plain C11, against headway/abi.h alone: each request goes to the live mixed engine
 * with the fewest outstanding tokens, ties broken round-robin, among those whose max_model_len
 * holds it (prompt + max_tokens) and, when one has, whose waiting queue has room (the host refuses
 * a request placed on a full queue: HTTP 429). Refuses with HW_UNAVAILABLE (the request is
 * refused, HTTP 503) when no engine that holds it is up. */
#include <headway/abi.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One engine's limits, from set_engine_limits; 0: unbounded, or not known. */
struct engine_limits {
  uint32_t max_waiting;   /* ABI 1.6 */
  uint32_t max_model_len; /* ABI 1.7 */
};

struct hw_router {
  uint32_t next; /* where the tie-breaking scan starts */
  struct engine_limits* limits;
  uint32_t limit_count;
};

static int32_t fail(hw_status* status, int32_t code, const char* message) {
  size_t size = strlen(message);
  if (size > HW_STATUS_MESSAGE_CAPACITY - 1) size = HW_STATUS_MESSAGE_CAPACITY - 1;
  status->code = code;
  memcpy(status->message, message, size);
  status->message[size] = '\0';
  return code;
}

static int32_t least_create(const hw_host_services* host, const hw_options* options,
                            const hw_engine_load* engines, uint32_t engine_count, hw_router** out,
                            hw_status* status) {
  hw_router* self;
  uint32_t i, mixed = 0;
  (void)host;
  (void)options;
  for (i = 0; i < engine_count; ++i) mixed += engines[i].role == HW_ENGINE_ROLE_MIXED;
  /* HW_INVALID_ARGUMENT: the deployment does not suit this router (a prefill/decode one). */
  if (mixed == 0) return fail(status, HW_INVALID_ARGUMENT, "c_least_loaded: needs mixed engines");
  self = calloc(1, sizeof *self);
  if (self == NULL) return fail(status, HW_RESOURCE_EXHAUSTED, "c_least_loaded: out of memory");
  *out = self;
  return HW_OK;
}

static void least_destroy(hw_router* self) {
  free(self->limits);
  free(self);
}

/* The host's elements are limits[0].struct_size bytes each, which differs from this build's
 * sizeof when host and plugin were built for different ABI minors: step by that size, and read a
 * field only where it fits (an older host's elements end before max_model_len). */
static int32_t least_set_engine_limits(hw_router* self, const hw_engine_limits* limits,
                                       uint32_t count, hw_status* status) {
  const size_t stride = count == 0 ? 0 : limits[0].struct_size;
  const size_t waiting_end = offsetof(hw_engine_limits, max_waiting) + sizeof(uint32_t);
  const size_t length_end = offsetof(hw_engine_limits, max_model_len) + sizeof(uint32_t);
  struct engine_limits* copy = count == 0 ? NULL : calloc(count, sizeof *copy);
  uint32_t i;
  if (count != 0 && copy == NULL) {
    return fail(status, HW_RESOURCE_EXHAUSTED, "c_least_loaded: out of memory");
  }
  for (i = 0; i < count; ++i) {
    const hw_engine_limits* l = (const hw_engine_limits*)((const char*)limits + i * stride);
    if (stride >= waiting_end) copy[i].max_waiting = l->max_waiting;
    if (stride >= length_end) copy[i].max_model_len = l->max_model_len;
  }
  free(self->limits);
  self->limits = copy;
  self->limit_count = count;
  return HW_OK;
}

static int has_room(const hw_router* self, const hw_engine_load* e) {
  uint32_t bound;
  if (e->engine_index >= self->limit_count) return 1;
  bound = self->limits[e->engine_index].max_waiting;
  return bound == 0 || e->waiting < bound;
}

/* The host admits requests up to the largest max_model_len of the deployment: a request goes only
 * where it fits (the host fails it otherwise, as this router's error). */
static int holds(const hw_router* self, const hw_engine_load* e, const hw_route_request* r) {
  uint32_t length;
  if (e->engine_index >= self->limit_count) return 1;
  length = self->limits[e->engine_index].max_model_len;
  return length == 0 || (uint64_t)r->prompt_tokens + r->max_output_tokens <= length;
}

static int32_t least_route(hw_router* self, const hw_route_request* request,
                           const hw_engine_load* engines, uint32_t engine_count,
                           hw_route_decision* decision, hw_status* status) {
  uint32_t k, best = engine_count;
  int with_room;
  /* First among the engines with room, then (every queue full: the host answers 429) among all. */
  for (with_room = 1; with_room >= 0 && best == engine_count; --with_room) {
    for (k = 0; k < engine_count; ++k) {
      const uint32_t i = (self->next + k) % engine_count;
      if (!engines[i].alive || engines[i].role != HW_ENGINE_ROLE_MIXED) continue;
      if (!holds(self, &engines[i], request)) continue;
      if (with_room && !has_room(self, &engines[i])) continue;
      if (best == engine_count ||
          engines[i].outstanding_tokens < engines[best].outstanding_tokens) {
        best = i;
      }
    }
  }
  if (best == engine_count) {
    return fail(status, HW_UNAVAILABLE, "c_least_loaded: no engine that holds the request is up");
  }
  self->next = (best + 1) % engine_count;
  decision->struct_size = sizeof *decision; /* the writer of a struct sets its size */
  decision->prefill_engine = engines[best].engine_index;
  decision->decode_engine = engines[best].engine_index;
  decision->fallback = 0;
  return HW_OK;
}

static const hw_router_table kTable = {
    .struct_size = sizeof(hw_router_table),
    .create = least_create,
    .destroy = least_destroy,
    .route = least_route,
    .set_engine_limits = least_set_engine_limits,
};

static const hw_plugin_descriptor kDescriptor = {
    .struct_size = sizeof(hw_plugin_descriptor),
    .abi_major = HW_ABI_MAJOR,
    .abi_minor = HW_ABI_MINOR,
    .kind = HW_KIND_ROUTER,
    .name = HW_STR_LITERAL("com.example.c.router.least_loaded"),
    .short_name = HW_STR_LITERAL("c_least_loaded"),
    .version = HW_STR_LITERAL("0.1.0"),
    .description = HW_STR_LITERAL("Fewest outstanding tokens among live engines, written in C"),
    .options = NULL,
    .option_count = 0,
    .table = &kTable,
};

HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
