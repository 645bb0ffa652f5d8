/* A step scheduler in plain C11, against headway/abi.h alone (no C++, no libstdc++): running
 * requests first, preempting the youngest when the KV cache runs out, then waiting requests first
 * come, first served, each chunked to what is left of the token budget. The C++ template
 * (share/headway/templates/step_scheduler) does the same with the SDK's helpers; here every part of
 * the contract is written out: the option schema, the tables, the descriptor, struct_size, the
 * status on failure. */
#include <headway/abi.h>
#include <stdlib.h>
#include <string.h>

/* The instance: create() allocates it, the host hands it back to every call, destroy() frees it. */
struct hw_scheduler {
  uint32_t budget;   /* max_num_batched_tokens */
  uint32_t max_seqs; /* max_num_seqs */
};

/* Designated initializers: an hw_option_spec has twelve fields, easy to misplace by position. */
static const hw_option_spec kOptions[] = {
    {.key = HW_STR_LITERAL("max_num_batched_tokens"),
     .type = HW_OPTION_INT,
     .doc = HW_STR_LITERAL("Tokens per step, all requests together."),
     .default_int = 2048,
     .has_min = 1,
     .has_max = 1,
     .min_value = 1.0,
     .max_value = 16777216.0},
    {.key = HW_STR_LITERAL("max_num_seqs"),
     .type = HW_OPTION_INT,
     .doc = HW_STR_LITERAL("Requests holding KV at once."),
     .default_int = 128,
     .has_min = 1,
     .has_max = 1,
     .min_value = 1.0,
     .max_value = 65536.0},
};

/* A failure: the code is returned, and the message goes into the host's status, NUL included,
 * never past HW_STATUS_MESSAGE_CAPACITY bytes. */
static int32_t fail(hw_status* status, int32_t code, const char* message) {
  size_t size = strlen(message);
  if (size > HW_STATUS_MESSAGE_CAPACITY - 1) size = HW_STATUS_MESSAGE_CAPACITY - 1;
  status->code = code;
  memcpy(status->message, message, size);
  status->message[size] = '\0';
  return code;
}

/* The host passes every declared option, in schema order, defaults filled in. */
static int64_t option_int(const hw_options* options, const char* key) {
  size_t size = strlen(key);
  uint32_t i;
  for (i = 0; i < options->count; ++i) {
    const hw_str k = options->values[i].key;
    if (k.size == size && memcmp(k.data, key, size) == 0) return options->values[i].int_value;
  }
  return 0;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* Blocks a request needs beyond those it holds to cache `tokens` more tokens. */
static uint32_t blocks_needed(const hw_request_view* r, uint32_t tokens, uint32_t block_size) {
  const uint64_t cached = (uint64_t)r->computed_tokens + tokens;
  const uint32_t blocks = (uint32_t)((cached + block_size - 1) / block_size);
  return blocks > r->blocks_held ? blocks - r->blocks_held : 0;
}

static int32_t fcfs_create(const hw_host_services* host, const hw_options* options,
                           const hw_engine_facts* facts, hw_scheduler** out, hw_status* status) {
  hw_scheduler* self = malloc(sizeof *self);
  (void)host;
  (void)facts;
  if (self == NULL) return fail(status, HW_RESOURCE_EXHAUSTED, "c_fcfs: out of memory");
  self->budget = (uint32_t)option_int(options, "max_num_batched_tokens");
  self->max_seqs = (uint32_t)option_int(options, "max_num_seqs");
  *out = self; /* never NULL on HW_OK */
  return HW_OK;
}

static void fcfs_destroy(hw_scheduler* self) { free(self); }

static int32_t fcfs_get_limits(hw_scheduler* self, hw_scheduler_limits* limits,
                               hw_status* status) {
  (void)status;
  limits->struct_size = sizeof *limits; /* the writer of a struct sets its size */
  limits->max_num_batched_tokens = self->budget;
  limits->max_num_seqs = self->max_seqs;
  return HW_OK;
}

/* Appends a slice of `tokens` tokens of r. The engine sizes the arrays to running + waiting, and a
 * request gets at most one slice a step, so the capacity check never fails here; it stays, since
 * a write past the host's array would corrupt the host's memory. */
static int add_slice(hw_scheduler_plan* plan, const hw_request_view* r, uint32_t tokens) {
  hw_slice* slice;
  if (plan->slice_count >= plan->slice_capacity) return 0;
  slice = &plan->slices[plan->slice_count++];
  slice->request_id = r->id;
  slice->start = r->computed_tokens;
  slice->tokens = tokens;
  return 1;
}

static int32_t fcfs_schedule(hw_scheduler* self, const hw_scheduler_snapshot* s,
                             hw_scheduler_plan* plan, hw_status* status) {
  uint32_t budget = self->budget;
  uint32_t free_blocks = s->kv_blocks_free;
  uint32_t kept = s->running_count; /* running requests not preempted: [0, kept) */
  uint32_t running, i;
  plan->slice_count = 0;
  plan->preempted_count = 0;
  for (i = 0; i < kept && budget > 0; ++i) {
    const hw_request_view* r = &s->running[i];
    const uint32_t tokens = min_u32(r->total_tokens - r->computed_tokens, budget);
    const uint32_t need = blocks_needed(r, tokens, s->block_size);
    /* Out of KV: preempt the youngest running requests (the last admitted) until it fits. */
    while (need > free_blocks && kept > i + 1) {
      const hw_request_view* victim = &s->running[--kept];
      if (plan->preempted_count >= plan->preempted_capacity) {
        return fail(status, HW_INTERNAL, "c_fcfs: more preemptions than the plan holds");
      }
      plan->preempted[plan->preempted_count++] = victim->id;
      free_blocks += victim->blocks_held - victim->blocks_shared; /* shared blocks stay held */
    }
    if (need > free_blocks) return HW_OK; /* the oldest alone does not fit: wait for KV */
    if (!add_slice(plan, r, tokens)) return fail(status, HW_INTERNAL, "c_fcfs: plan full");
    budget -= tokens;
    free_blocks -= need;
  }
  if (kept < s->running_count) return HW_OK; /* nothing is admitted in a step that preempts */
  running = s->running_count;
  for (i = 0; i < s->waiting_count && running < self->max_seqs && budget > 0; ++i) {
    const hw_request_view* w = &s->waiting[i];
    const uint32_t tokens = min_u32(w->total_tokens - w->computed_tokens, budget);
    const uint32_t need = blocks_needed(w, tokens, s->block_size);
    if (need > free_blocks) break; /* first come, first served: nobody overtakes it */
    if (!add_slice(plan, w, tokens)) return fail(status, HW_INTERNAL, "c_fcfs: plan full");
    budget -= tokens;
    free_blocks -= need;
    ++running;
  }
  return HW_OK;
}

static const hw_scheduler_table kTable = {
    .struct_size = sizeof(hw_scheduler_table),
    .create = fcfs_create,
    .destroy = fcfs_destroy,
    .get_limits = fcfs_get_limits,
    .schedule = fcfs_schedule,
};

static const hw_plugin_descriptor kDescriptor = {
    .struct_size = sizeof(hw_plugin_descriptor),
    .abi_major = HW_ABI_MAJOR,
    .abi_minor = HW_ABI_MINOR,
    .kind = HW_KIND_STEP_SCHEDULER,
    .name = HW_STR_LITERAL("com.example.c.scheduler.fcfs"),
    .short_name = HW_STR_LITERAL("c_fcfs"),
    .version = HW_STR_LITERAL("0.1.0"),
    .description = HW_STR_LITERAL("First come, first served with chunking, written in C"),
    .options = kOptions,
    .option_count = sizeof kOptions / sizeof kOptions[0],
    .table = &kTable,
};

/* The one exported symbol (headway_add_plugin hides the others). */
HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
