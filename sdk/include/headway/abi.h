/*
 * Headway plugin ABI: the only contract between the Headway host and a plugin shared library.
 *
 * Everything that crosses the boundary is declared here, in plain C: fixed-width integers, sized
 * strings, plain structs, opaque handles and function pointers. No C++ type, exception or RTTI ever
 * crosses, so a plugin may be built with another compiler or standard library than the host.
 *
 * Rules that hold for every function in this file:
 * - Ownership: whoever allocates frees. Memory passed *into* a call is borrowed for the duration of
 *   that call only, unless the comment says otherwise. Memory a plugin returns through a descriptor
 *   (names, option schemas, tables) must stay valid for as long as the library is loaded; the host
 *   never unloads a library while the process runs.
 * - Errors: fallible functions return an hw_status_code and, on failure, fill the caller-provided
 *   hw_status (code + NUL-terminated message, truncated to fit: at most
 *   HW_STATUS_MESSAGE_CAPACITY bytes with the NUL, never past it). HW_OK means the status is
 *   untouched. The returned value is the code the host acts on; the host zeroes the status before
 *   every call.
 * - Versions: each struct that may grow begins with struct_size. A reader only touches the fields
 *   that fit inside struct_size; a NULL function pointer in a table is an absent optional function.
 *   Whoever fills a struct sets its struct_size: the plugin in its descriptor, its tables and the
 *   structs it writes for the host (hw_scheduler_limits, hw_route_decision, hw_model_info), to
 *   sizeof as it was compiled; the host refuses one whose size covers less than ABI 1.0's fields.
 *   Structs the host hands over for filling (hw_scheduler_plan, hw_model_output) carry the host's
 *   size and capacities: a plugin writes no entry past a capacity.
 * - Instances: a create() that returns HW_OK sets *out to a non-NULL handle, which every later
 *   call receives (a plugin without state returns the address of a static object); the host
 *   refuses NULL.
 * - Threading: stated per kind below. A plugin instance (handle) is only ever called from one
 * thread at a time unless its kind says otherwise; different instances may be called concurrently.
 */
#ifndef HEADWAY_ABI_H
#define HEADWAY_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A minor bump adds fields at the end of structs or entries at the end of tables; a major bump
 * changes or removes anything. The host accepts a plugin with equal major and minor <= host minor.
 * History: 1.0 first release; 1.1 added hw_engine_facts.engine_role; 1.2 added the KV transport's
 * peer links (hw_kv_transport_table.peer_*); 1.3 named hw_request_view's last field (reserved,
 * always 0 before) blocks_shared, for KV blocks shared through the prefix cache; 1.4 added
 * hw_model_info.returns_prompt_logits and named hw_model_slice's last field (reserved, always 0
 * before) all_logits, for the log-probabilities of a prompt's tokens; 1.5 added
 * hw_model_info.returns_logits_on_request and hw_model_batch.logits_wanted, so that a model that
 * samples on its device hands the host the rows of the requests the host must sample itself; 1.6
 * added hw_router_table.set_engine_limits (hw_engine_limits), so that a router sees which engines'
 * waiting queues are full and places a request where it is not refused; 1.7 added
 * hw_engine_limits.max_model_len, so that engines of one deployment may hold different context
 * lengths (a long-prompt pool with a larger one) and a router places each request where it
 * fits; 1.8 added hw_router_table.route_with_prefix (hw_route_prefix), so that a router sees how a
 * prompt begins and may send prompts that begin alike to the engine whose prefix cache holds them;
 * 1.9 added hw_router_table.kv_events (hw_kv_event), so that such a router learns which prompt
 * beginnings each engine's prefix cache stores and evicts instead of guessing them.
 */
#define HW_ABI_MAJOR 1
#define HW_ABI_MINOR 9

/* The single symbol every plugin exports. */
#define HW_PLUGIN_ENTRY_SYMBOL "headway_plugin_entry"

#if defined(_WIN32)
#define HW_EXPORT __declspec(dllexport)
#else
#define HW_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------------------------------
 * Strings and status
 * --------------------------------------------------------------------------------------------- */

/* A borrowed, sized string; not necessarily NUL-terminated. */
typedef struct hw_str {
  const char* data;
  uint64_t size;
} hw_str;

/* An hw_str initializer for a string literal, usable in static descriptors and option schemas:
 * static const hw_str name = HW_STR_LITERAL("fcfs"); ("" makes a pointer, whose sizeof is not
 * the string's, a compile error) */
#define HW_STR_LITERAL(literal) \
  { ("" literal), sizeof("" literal) - 1 }

typedef enum hw_status_code {
  HW_OK = 0,
  HW_INVALID_ARGUMENT = 1,
  HW_NOT_FOUND = 2,
  HW_RESOURCE_EXHAUSTED = 3,
  HW_UNAVAILABLE = 4,
  HW_INTERNAL = 5,
  HW_UNIMPLEMENTED = 6,
  HW_FAILED_PRECONDITION = 7,
  HW_DEADLINE_EXCEEDED = 8
} hw_status_code;

#define HW_STATUS_MESSAGE_CAPACITY 1024

/* Owned by the caller (usually on its stack); filled by the callee on failure. */
typedef struct hw_status {
  int32_t code; /* hw_status_code */
  char message[HW_STATUS_MESSAGE_CAPACITY];
} hw_status;

/* ------------------------------------------------------------------------------------------------
 * Option schema: what a plugin accepts in its TOML table. The host validates and fills defaults.
 * --------------------------------------------------------------------------------------------- */

typedef enum hw_option_type {
  HW_OPTION_BOOL = 0,
  HW_OPTION_INT = 1,
  HW_OPTION_DOUBLE = 2,
  HW_OPTION_STRING = 3,
  HW_OPTION_ENUM = 4 /* a string restricted to allowed_values */
} hw_option_type;

typedef struct hw_option_spec {
  hw_str key;
  int32_t type; /* hw_option_type */
  hw_str doc;
  /* Default: default_int for BOOL (0/1) and INT, default_double for DOUBLE, default_string for
   * STRING and ENUM. */
  int64_t default_int;
  double default_double;
  hw_str default_string;
  /* Inclusive range for INT and DOUBLE, checked only when has_min / has_max is non-zero. */
  int32_t has_min;
  int32_t has_max;
  double min_value;
  double max_value;
  /* Allowed values for ENUM. */
  const hw_str* allowed_values;
  uint32_t allowed_count;
} hw_option_spec;

/* A validated option value handed to a plugin's create(). The host passes one value per declared
 * option, in schema order, defaults filled in. */
typedef struct hw_option_value {
  hw_str key;
  int32_t type;        /* hw_option_type */
  int64_t int_value;   /* BOOL and INT */
  double double_value; /* DOUBLE */
  hw_str string_value; /* STRING and ENUM */
} hw_option_value;

typedef struct hw_options {
  const hw_option_value* values;
  uint32_t count;
} hw_options;

/* ------------------------------------------------------------------------------------------------
 * Host services: handed to every create(); valid until the instance is destroyed. Thread-safe.
 * --------------------------------------------------------------------------------------------- */

typedef enum hw_log_level {
  HW_LOG_DEBUG = 0,
  HW_LOG_INFO = 1,
  HW_LOG_WARN = 2,
  HW_LOG_ERROR = 3
} hw_log_level;

typedef struct hw_host_services {
  uint32_t struct_size;
  void* context; /* opaque, passed back to every service */
  void (*log)(void* context, int32_t level, hw_str message);
  /* Seconds on the clock of the engine (or cluster) that owns the instance: virtual under
   * simulation, monotonic wall time otherwise. A plugin cannot and need not tell which. */
  double (*now)(void* context);
  /* Adds delta to a counter named by the plugin (created on first use). `headway serve` exports
   * it as headway_plugin_total{..., metric="<name>"}: a delta that is not above 0 is
   * kept but not exported (a Prometheus counter only goes up). Names: UTF-8, 1 to 128 bytes, at
   * most 64 per instance (counters and gauges together) exported; others are kept only. Fixed
   * names: one made per request would take the 64 at once. */
  void (*counter_add)(void* context, hw_str name, double delta);
  /* Sets a gauge named by the plugin; exported as headway_plugin_value, names as above. */
  void (*gauge_set)(void* context, hw_str name, double value);
  /* Aligned allocation from the host; free with free_bytes. alignment is a power of two. */
  void* (*allocate)(void* context, uint64_t bytes, uint64_t alignment);
  void (*free_bytes)(void* context, void* pointer);
} hw_host_services;

/* ------------------------------------------------------------------------------------------------
 * Descriptor
 * --------------------------------------------------------------------------------------------- */

typedef enum hw_plugin_kind {
  HW_KIND_STEP_SCHEDULER = 1,
  HW_KIND_ROUTER = 2,
  HW_KIND_KV_TRANSPORT = 3,
  HW_KIND_MODEL = 4
} hw_plugin_kind;

/* The host refuses a descriptor whose strings or counts exceed these bounds (or whose hw_str has
 * a size but NULL data): names (name, short_name, version, option keys, enum values) at most 256
 * bytes; description, option docs and default strings at most 64 KiB; at most 1024 options, and
 * 1024 values per enum option. */
typedef struct hw_plugin_descriptor {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  int32_t kind;       /* hw_plugin_kind */
  hw_str name;        /* reverse-DNS, e.g. "org.headway.scheduler.chunked" */
  hw_str short_name;  /* what operators write in TOML, e.g. "chunked" */
  hw_str version;     /* semantic version of the plugin itself */
  hw_str description; /* one line */
  const hw_option_spec* options;
  uint32_t option_count;
  /* Points to the table of this kind: hw_scheduler_table, hw_router_table, hw_kv_transport_table or
   * hw_model_table. Each table starts with its own struct_size. */
  const void* table;
} hw_plugin_descriptor;

/* The exported entry point. Must be cheap and side-effect free: the host calls it to describe a
 * plugin without creating anything. The returned descriptor is owned by the plugin and lives as
 * long as the library. Any thread. */
typedef const hw_plugin_descriptor* (*hw_plugin_entry_fn)(void);

/* ------------------------------------------------------------------------------------------------
 * Requests as the engine sees them (shared by schedulers, routers and models)
 * --------------------------------------------------------------------------------------------- */

typedef enum hw_request_state {
  HW_REQUEST_WAITING = 0,
  HW_REQUEST_PREFILLING = 1,
  HW_REQUEST_TRANSFERRING = 2,
  HW_REQUEST_DECODING = 3,
  HW_REQUEST_FINISHED = 4,
  HW_REQUEST_ABORTED = 5
} hw_request_state;

/* A read-only view of one request inside an engine. Token accounting is unified for prefill and
 * decode: total_tokens = prompt_tokens + output_tokens is what the request knows, computed_tokens
 * is how many of them have KV in the cache; a step may compute up to total - computed tokens of it,
 * and a token is sampled when a slice brings computed up to total. A decoding request therefore has
 * exactly one token to compute; a preempted request restarts from computed = 0 with its outputs
 * kept. A waiting request may have computed tokens already: KV moved to this engine (it then holds
 * its blocks), or a beginning found in the engine's prefix cache (blocks_held 0: the cached blocks
 * are free or held by running requests, and become its own too when it is scheduled, so counting
 * the blocks for computed + tokens, as for any request, is enough). Either way its first slice
 * starts at computed_tokens. */
typedef struct hw_request_view {
  uint64_t id;
  int32_t state;    /* hw_request_state */
  int32_t priority; /* lower is more urgent */
  uint32_t prompt_tokens;
  uint32_t output_tokens;   /* generated so far */
  uint32_t total_tokens;    /* prompt_tokens + output_tokens */
  uint32_t computed_tokens; /* tokens whose KV is cached */
  uint32_t max_output_tokens;
  uint32_t blocks_held;     /* KV blocks allocated to it */
  double arrival_time;      /* seconds, engine clock */
  uint64_t admission_order; /* increases each time a request is admitted (or re-admitted) */
  uint32_t preemptions;     /* times this request was preempted so far */
  /* Since 1.3: of blocks_held, the blocks other requests hold too (a prompt beginning found in the
   * prefix cache): preempting this request frees blocks_held - blocks_shared of them. An engine
   * shares blocks between running requests only when its scheduler is built against 1.3 or later
   * (a plugin built before reads this field as reserved, and counts blocks_held as freed); with an
   * older scheduler it reuses cached blocks only while no request holds them, and this is 0. A
   * scheduler rebuilt against 1.3 must count blocks_held - blocks_shared as freed. */
  uint32_t blocks_shared;
} hw_request_view;

/* ------------------------------------------------------------------------------------------------
 * Step scheduler
 * Threading: schedule() of one instance is called by one engine thread at a time.
 * --------------------------------------------------------------------------------------------- */

typedef struct hw_scheduler hw_scheduler; /* opaque, owned by the plugin */

/* Engine facts a scheduler is created with. */
typedef struct hw_engine_facts {
  uint32_t struct_size;
  uint32_t block_size; /* tokens per KV block */
  uint32_t kv_blocks_total;
  uint32_t max_model_len; /* prompt + output tokens a request may reach */
  /* Since ABI 1.1 (read only when struct_size covers it): hw_engine_role of the engine, e.g. so a
   * scheduler on a decode engine can favour requests whose KV was moved there. */
  int32_t engine_role;
} hw_engine_facts;

/* The limits a scheduler promises to respect; the engine rejects any plan that breaks them. Both
 * at least 1 (a scheduler declaring 0 is refused at load); UINT32_MAX for no cap of its own. */
typedef struct hw_scheduler_limits {
  uint32_t struct_size;
  uint32_t max_num_batched_tokens; /* tokens per step, all slices together */
  uint32_t max_num_seqs;           /* requests running (holding KV) after the step */
} hw_scheduler_limits;

/* The engine's queues at the start of a step. Borrowed for the duration of schedule().
 * running: admitted requests holding KV, in admission order.
 * waiting: in queue order (holders of moved KV first, then preempted requests, then arrivals). */
typedef struct hw_scheduler_snapshot {
  uint32_t struct_size;
  uint64_t step_index;
  double now;
  const hw_request_view* running;
  uint32_t running_count;
  const hw_request_view* waiting;
  uint32_t waiting_count;
  uint32_t kv_blocks_free;
  uint32_t kv_blocks_total;
  uint32_t block_size;
  uint32_t max_model_len;
} hw_scheduler_snapshot;

/* One piece of work in a step: tokens [start, start + tokens) of a request. start must equal the
 * request's computed_tokens. */
typedef struct hw_slice {
  uint64_t request_id;
  uint32_t start;
  uint32_t tokens;
} hw_slice;

/* The scheduler's answer. Arrays are owned by the engine and sized to running + waiting; the
 * scheduler writes entries and sets the counts. Preempted requests lose their KV before the slices
 * are executed, return to the head of the waiting queue and are recomputed later. */
typedef struct hw_scheduler_plan {
  uint32_t struct_size;
  hw_slice* slices;
  uint32_t slice_capacity;
  uint32_t slice_count;
  uint64_t* preempted;
  uint32_t preempted_capacity;
  uint32_t preempted_count;
} hw_scheduler_plan;

typedef struct hw_scheduler_table {
  uint32_t struct_size;
  /* Creates an instance. options are validated against the schema. *out is owned by the caller
   * and released with destroy(). */
  int32_t (*create)(const hw_host_services* host, const hw_options* options,
                    const hw_engine_facts* facts, hw_scheduler** out, hw_status* status);
  void (*destroy)(hw_scheduler* scheduler);
  /* Fills the limits this instance will respect (called once after create). */
  int32_t (*get_limits)(hw_scheduler* scheduler, hw_scheduler_limits* limits, hw_status* status);
  /* Plans one step. Must not block; should not allocate in steady state. */
  int32_t (*schedule)(hw_scheduler* scheduler, const hw_scheduler_snapshot* snapshot,
                      hw_scheduler_plan* plan, hw_status* status);
} hw_scheduler_table;

/* ------------------------------------------------------------------------------------------------
 * Router
 * Threading: route() of one instance is called from one thread at a time, not always the same one
 * (under `headway serve`, the request threads take turns under the service's lock): keep no
 * thread_local state. route() runs under that lock, so it must not block (no I/O, sleeping or
 * waiting for another thread): every request arriving meanwhile waits for it, and the server logs
 * a route() call of 100 ms or more.
 * --------------------------------------------------------------------------------------------- */

typedef struct hw_router hw_router;

typedef enum hw_engine_role {
  HW_ENGINE_ROLE_MIXED = 0, /* prefill and decode */
  HW_ENGINE_ROLE_PREFILL = 1,
  HW_ENGINE_ROLE_DECODE = 2
} hw_engine_role;

/* One engine as the router sees it: static identity plus its load at the time of the call. The
 * host always passes every engine of the deployment, dead ones included (alive = 0), in order, so
 * engines[i].engine_index == i; a decision names engines by that index. */
typedef struct hw_engine_load {
  uint32_t engine_index;
  int32_t role;  /* hw_engine_role */
  hw_str pool;   /* the pool named in the deployment TOML ("" when none) */
  int32_t alive; /* 0 when the engine is down */
  uint32_t running;
  /* Waiting here, including (on a decode engine) the requests routed to it that are still being
   * prefilled elsewhere or moving their KV: each counts its output tokens in outstanding_tokens. */
  uint32_t waiting;
  uint64_t queued_prefill_tokens; /* prompt tokens still to compute, running + waiting */
  uint64_t outstanding_tokens;    /* queued prefill tokens + decode tokens still to generate */
  uint32_t kv_blocks_free;
  uint32_t kv_blocks_total;
  uint32_t block_size;
} hw_engine_load;

/* What an engine admits, from the deployment (ABI 1.6). Static for an in-process engine; an engine
 * process behind a router reports its own, which can change when it restarts. */
typedef struct hw_engine_limits {
  uint32_t struct_size;
  uint32_t engine_index;
  /* The engine's waiting-queue bound (max_waiting in its [[engines]] table); 0: unbounded, or not
   * known yet. The host refuses (HTTP 429) a request placed on an engine whose own count of
   * waiting requests has reached it. hw_engine_load.waiting may count more (the requests headed
   * to a decode engine; behind a router, those sent since the engine process's last load
   * report), so a router that compares the two errs towards "full". */
  uint32_t max_waiting;
  /* The longest request the engine holds, prompt + max_output_tokens (ABI 1.7); 0: not known
   * (treat it as holding any). The host admits requests up to the largest max_model_len of the
   * deployment's engines when its router reads this field (an ABI 1.7 router with
   * set_engine_limits), and up to the smallest otherwise; so a 1.7 router must place a request
   * only on engines that hold it (its prefill engine too: an engine admits a request, prefill-only
   * or not, only when all of it fits), and answer HW_UNAVAILABLE when only engines that are down
   * do. The host fails a request placed where it does not fit as the router's error (HTTP 500). */
  uint32_t max_model_len;
} hw_engine_limits;

typedef struct hw_route_request {
  uint64_t id;
  uint32_t prompt_tokens;
  /* The request's max_tokens. A request without one (a chat that runs to the end of the context)
   * is given what it needs at least (1, its min_tokens, or one past the tokens it has streamed
   * when it is placed again) when the router reads the engines' max_model_len (ABI 1.7), so that
   * an engine with a shorter context may take it; the host then bounds it by the engines it is
   * placed on. For an older router, what the host admits. */
  uint32_t max_output_tokens;
  int32_t priority;
  hw_str request_class;
} hw_route_request;

/* How a request's prompt begins (ABI 1.8), for route_with_prefix: hashes[i] names the prompt's
 * first (i + 1) * piece_tokens token ids, so two prompts share hashes[0..k] exactly when (but for a
 * 64-bit collision) they share their first (k + 1) * piece_tokens ids. One hash per whole piece;
 * a prompt's last partial piece has none. The host computes them with one fixed function, the same
 * for every request and on every run, so a router may keep them from request to request and
 * compare them with a later prompt's. count is 0 where the ids are not known (a simulated request
 * without a shared beginning) or the prompt is shorter than a piece. Borrowed for the call, as the
 * request is. */
typedef struct hw_route_prefix {
  uint32_t struct_size;
  uint32_t piece_tokens;
  const uint64_t* hashes;
  uint32_t count;
} hw_route_prefix;

/* What an engine's prefix cache did with one piece of a prompt beginning (ABI 1.9), for
 * kv_events: vLLM's KV cache events (BlockStored, BlockRemoved, AllBlocksCleared) in the hashes of
 * hw_route_prefix: piece_hash names a beginning of k x piece_tokens ids (k >= 1), as
 * hw_route_prefix.hashes[k - 1] of a prompt that begins so. The struct never grows: new
 * information would be a new kind, which a router ignores. */
typedef enum hw_kv_event_kind {
  /* The cache now holds the piece and everything before it: a later prompt that begins so finds
   * it there (until it is removed). Reported when the piece is stored, in the order of the prompt,
   * and again when a request takes it from the cache (or computes it again). */
  HW_KV_EVENT_STORED = 1,
  /* The cache evicted (part of) the piece: a prompt that begins so computes it again. */
  HW_KV_EVENT_REMOVED = 2,
  /* Forget every piece the engine was said to hold (piece_hash 0): its cache was emptied, or the
   * host dropped some of its events (a router that was not told for a long while). */
  HW_KV_EVENT_ALL_REMOVED = 3
} hw_kv_event_kind;

typedef struct hw_kv_event {
  uint64_t piece_hash;
  int32_t kind;      /* hw_kv_event_kind */
  uint32_t reserved; /* 0 */
} hw_kv_event;

typedef struct hw_route_decision {
  uint32_t struct_size;
  /* Engine that prefills the request (and decodes it when decode_engine equals it). */
  uint32_t prefill_engine;
  uint32_t decode_engine;
  /* Non-zero when the request was sent outside its preferred pool (fallback). */
  int32_t fallback;
} hw_route_decision;

typedef struct hw_router_table {
  uint32_t struct_size;
  /* engines/engine_count describe the deployment (load fields zero). Borrowed for the call. */
  int32_t (*create)(const hw_host_services* host, const hw_options* options,
                    const hw_engine_load* engines, uint32_t engine_count, hw_router** out,
                    hw_status* status);
  void (*destroy)(hw_router* router);
  /* Picks engines for one request. HW_UNAVAILABLE when no engine can take it: the request is
   * refused (HTTP 503). Any other failure (another code, a thrown exception) is the router's own:
   * the request fails as the server's error (HTTP 500), never the client's. Must not block. */
  int32_t (*route)(hw_router* router, const hw_route_request* request,
                   const hw_engine_load* engines, uint32_t engine_count,
                   hw_route_decision* decision, hw_status* status);
  /* Optional (ABI 1.6; NULL: the router is never told). The engines' limits, one per engine of
   * the deployment in order (engine i's at index i): called after create(), before the first
   * route(), and again whenever one changes (an engine process behind a router answers for the
   * first time, or restarts with another configuration); never concurrently with route(), under
   * the same serialisation. `limits` is an array of `count` structs of limits[0].struct_size
   * bytes each (the host's sizeof): step through it by that size, not by the plugin's sizeof,
   * and read a field only where struct_size covers it (headway::sdk::Router does both), so that a
   * later minor may append fields. Borrowed for the call: keep a copy. A failure fails the
   * deployment's start (or, later, the request being routed, as the server's error). */
  int32_t (*set_engine_limits)(hw_router* router, const hw_engine_limits* limits, uint32_t count,
                               hw_status* status);
  /* Optional (ABI 1.8; NULL: the host calls route()). route() with the prompt's beginning: where
   * it is set the host calls it instead of route() for every request, under the same rules
   * (threading, codes, what a decision may name). Read prefix's fields only where its struct_size
   * covers them. */
  int32_t (*route_with_prefix)(hw_router* router, const hw_route_request* request,
                               const hw_route_prefix* prefix, const hw_engine_load* engines,
                               uint32_t engine_count, hw_route_decision* decision,
                               hw_status* status);
  /* Optional (ABI 1.9; NULL: the engines keep no events). What engine `engine_index`'s prefix
   * cache stored and evicted since the last call for that engine, oldest first: the host calls it
   * before a route() (or route_with_prefix()) for every engine with events, under the same
   * serialisation, so the router places the request on what the caches held after each engine's
   * last step (behind a router process, as of each engine process's last load report). Only
   * engines that cache prefixes report, and the host announces each of them with a call of no
   * events (count 0, events NULL) before its first events: before the first route() for an
   * engine of the router's own process, and before the first route() after an engine process
   * first said it reports. A router may take an engine it was not told of as one that reports
   * nothing. A routed request is stored there only once computed (or its KV arrived): a router
   * still counts what it just sent. Borrowed for the call. A failure fails the deployment's start
   * (an announcement at start) or the request being routed (logged, on an engine process's feed);
   * the host then announces again, and begins the engine's next events with ALL_REMOVED. */
  int32_t (*kv_events)(hw_router* router, uint32_t engine_index, const hw_kv_event* events,
                       uint32_t count, hw_status* status);
} hw_router_table;

/* ------------------------------------------------------------------------------------------------
 * KV transport
 * Threading: all functions of one instance may be called from any thread; the plugin synchronises.
 * --------------------------------------------------------------------------------------------- */

typedef struct hw_kv_transport hw_kv_transport;

typedef enum hw_memory_kind {
  HW_MEMORY_HOST = 0,
  HW_MEMORY_DEVICE = 1,
  HW_MEMORY_NONE = 2 /* simulated: no bytes behind it */
} hw_memory_kind;

/* A KV region: block b occupies [base + b * block_stride, + block_bytes). */
typedef struct hw_memory_desc {
  void* base;
  uint64_t bytes;
  int32_t kind;      /* hw_memory_kind */
  int32_t device_id; /* -1 for host */
  uint64_t block_bytes;
  uint64_t block_stride;
} hw_memory_desc;

/* Everything a transfer names (both block lists, and the memory of both regions) stays valid until
 * poll() reports it DONE or FAILED or fails: the host then frees or reuses it. */
typedef struct hw_kv_transfer {
  uint32_t struct_size;
  uint64_t request_id;
  hw_memory_desc source;
  hw_memory_desc destination;
  const uint32_t* source_blocks; /* borrowed until the transfer ends (above) */
  const uint32_t* destination_blocks;
  uint32_t block_count;
  uint32_t source_engine;
  uint32_t destination_engine;
} hw_kv_transfer;

typedef enum hw_transfer_state {
  HW_TRANSFER_PENDING = 0,
  HW_TRANSFER_DONE = 1,
  HW_TRANSFER_FAILED = 2
} hw_transfer_state;

typedef struct hw_kv_transport_table {
  uint32_t struct_size;
  int32_t (*create)(const hw_host_services* host, const hw_options* options, hw_kv_transport** out,
                    hw_status* status);
  /* The transport joins its threads here. Normally every transfer the host started has ended;
   * when a run stops on an error (simulate), some may still be pending: abandon them. */
  void (*destroy)(hw_kv_transport* transport);
  /* Starts a transfer; *handle identifies it until poll() reports DONE or FAILED. */
  int32_t (*start)(hw_kv_transport* transport, const hw_kv_transfer* transfer, uint64_t* handle,
                   hw_status* status);
  /* Non-blocking. *state is hw_transfer_state; *seconds is the transfer's duration once done (on
   * the engines' clock: modelled under simulation, measured otherwise; finite and >= 0, else the
   * host takes the answer as a broken contract). A simulated transfer
   * (source region HW_MEMORY_NONE) answers DONE with its modelled duration within 2 s of wall time
   * of its start: the virtual clock waits for it. A failure is FAILED or an error status, never a
   * state or a status code this header does not define. */
  int32_t (*poll)(hw_kv_transport* transport, uint64_t handle, int32_t* state, double* seconds,
                  hw_status* status);

  /* --- ABI 1.2, optional (all NULL, or a struct_size that ends before them: no peer links) ---
   * Peer links move KV between processes, each side naming only its own memory and blocks (NCCL
   * send/recv between the GPUs of two engine processes). One side makes a rendezvous id, hands it
   * to the other out of band (Headway: over the engines' gRPC channel), and both join it with
   * opposite ranks, 0 and 1. Sends and receives posted on one link are matched in the order each
   * side posts them: the caller keeps both sides' orders equal, and a send and its receive have the
   * same block count and block bytes. poll() reports posted transfers as it reports start()'s.
   * Headway uses a link in one direction only (the prefill process sends, the decode process
   * receives), so the order between a side's own sends and receives is left to the plugin. A
   * posted transfer's memory and block list are borrowed until poll() reports it DONE or FAILED;
   * a send is DONE once its bytes left that memory (its blocks may be reused). */
  /* Writes a new rendezvous id of at most HW_PEER_ID_MAX bytes into id[0 .. *size). */
  int32_t (*peer_rendezvous)(hw_kv_transport* transport, uint8_t* id, uint64_t capacity,
                             uint64_t* size, hw_status* status);
  /* Joins a rendezvous as `rank` for KV in memory of kind `memory_kind` on `device_id` (-1: host).
   * Returns at once; peer_state() says when the link is up. *link identifies it until closed. */
  int32_t (*peer_join)(hw_kv_transport* transport, const uint8_t* id, uint64_t size, int32_t rank,
                       int32_t memory_kind, int32_t device_id, uint64_t* link, hw_status* status);
  /* Non-blocking: *state is HW_TRANSFER_PENDING (joining), DONE (up) or FAILED (the join failed or
   * timed out, a transfer on the link failed, or the other side went away: close it and make
   * another). */
  int32_t (*peer_state)(hw_kv_transport* transport, uint64_t link, int32_t* state,
                        hw_status* status);
  /* Posts a send (direction HW_PEER_SEND) of `memory`'s blocks blocks[0 .. block_count), or a
   * receive (HW_PEER_RECEIVE) into them, on a link that is up. The block list is borrowed until
   * poll(*handle) reports DONE or FAILED. */
  int32_t (*peer_post)(hw_kv_transport* transport, uint64_t link, int32_t direction,
                       const hw_memory_desc* memory, const uint32_t* blocks, uint32_t block_count,
                       uint64_t* handle, hw_status* status);
  /* Closes a link; transfers still in flight on it report FAILED from now on, and once this returns
   * the plugin touches none of their memory. */
  void (*peer_close)(hw_kv_transport* transport, uint64_t link);
} hw_kv_transport_table;

#define HW_PEER_ID_MAX 256

typedef enum hw_peer_direction { HW_PEER_SEND = 0, HW_PEER_RECEIVE = 1 } hw_peer_direction;

/* ------------------------------------------------------------------------------------------------
 * Model
 * Threading: one thread at a time calls an instance, not always the same one: `headway serve`
 * calls create(), get_info() and init_kv() on the thread that loads the deployment and forward()
 * on the engine's thread. State a runtime keeps per thread (a current CUDA device, a context) is
 * set again in each call. forward() may use its own worker threads.
 * KV: a request's KV lives in the blocks of its block_table and nowhere else the model keeps
 * between calls: with prefix caching (on by default) a request's first slice may start at
 * start > 0 on blocks another request's tokens filled, and a block may serve several requests.
 * A model keyed on request_id (a cache per sequence) gives wrong answers there; conformance's
 * model.shared_prefix checks it.
 * --------------------------------------------------------------------------------------------- */

typedef struct hw_model hw_model;

typedef struct hw_model_info {
  uint32_t struct_size;
  uint32_t layers;
  uint32_t hidden;
  uint32_t heads;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t vocab;
  uint32_t max_model_len;
  uint32_t eos_token; /* UINT32_MAX when the model never stops by itself */
  /* One token's KV across all layers, K and V: the model's, each kv head counted once however many
   * GPUs hold a copy (tensor parallelism past the kv head count), so that engines of one model
   * agree on it whatever their parallelism. */
  uint64_t kv_bytes_per_token;
  /* KV tokens the model can hold (memory after weights); the engine sizes its block pool from it
   * unless the deployment overrides it. */
  uint64_t kv_capacity_tokens;
  /* Non-zero when forward() reads token ids (real models); a simulated model ignores them. */
  int32_t needs_token_ids;
  /* Non-zero when forward() reports the step's duration (virtual clock); zero for real models whose
   * duration the engine measures on the wall clock. */
  int32_t reports_duration;
  /* Non-zero when forward() writes logits for the host to sample from (hw_model_output.logits);
   * zero when the model samples itself (on its device) and writes hw_model_output.sampled. */
  int32_t returns_logits;
  /* Since 1.4 (zero from a plugin built against an earlier ABI): non-zero when, with
   * returns_logits or returns_logits_on_request, forward() honours hw_model_slice.all_logits.
   * Only then does the host ask for the log-probabilities of prompt tokens. */
  int32_t returns_prompt_logits;
  /* Since 1.5 (zero from a plugin built against an earlier ABI): non-zero when the model samples
   * itself (returns_logits == 0) and also writes the logits row of each sampling slice that
   * hw_model_batch.logits_wanted marks. The host then samples those slices itself (logprobs,
   * penalties, logit bias, guided output, ...) while the device samples all the others, and only
   * the requests that ask pay for a row's copy. */
  int32_t returns_logits_on_request;
} hw_model_info;

/* One slice of a forward pass. */
typedef struct hw_model_slice {
  uint64_t request_id;
  uint32_t start;              /* first position */
  uint32_t tokens;             /* positions [start, start + tokens) */
  const int32_t* token_ids;    /* tokens entries, or NULL when the model does not need ids */
  const uint32_t* block_table; /* KV blocks of the request, covering start + tokens positions */
  uint32_t block_count;
  int32_t sample;        /* non-zero: sample a token from the last position */
  float temperature;     /* 0 = greedy */
  float top_p;           /* 1 = off */
  uint64_t seed;         /* per-request sampling seed */
  uint32_t output_index; /* index of the token to sample among the request's outputs */
  uint32_t top_k;        /* 0 = off */
  float min_p;           /* 0 = off */
  /* Since 1.4, set only for a model whose info has returns_prompt_logits (always 0 otherwise):
   * non-zero asks for a logits row for every position of the slice, not only the last (the
   * log-probabilities of a prompt's tokens: row i gives the distribution of the token at
   * start + i + 1). */
  uint32_t all_logits;
} hw_model_slice;

typedef struct hw_model_batch {
  uint32_t struct_size;
  const hw_model_slice* slices;
  uint32_t slice_count;
  uint32_t block_size;
  /* Since 1.5 (read it only where struct_size covers it), for a model whose info has
   * returns_logits_on_request, NULL otherwise and when no slice asks: slice_count entries,
   * non-zero where the host wants the logits row of a slice that samples. The model still writes
   * hw_model_output.sampled for that slice; the host samples from the row and ignores the id. */
  const uint8_t* logits_wanted;
} hw_model_batch;

/* Buffers owned by the engine, valid for the forward() call. */
typedef struct hw_model_output {
  uint32_t struct_size;
  /* slice_count entries; written where sample != 0 when the model samples itself. */
  int32_t* sampled;
  double seconds; /* the step's duration when info.reports_duration */
  /* When info.returns_logits: in slice order, `tokens` rows of `vocab` floats for a slice with
   * all_logits != 0 (one per position; its last row is the one sampled from when sample != 0),
   * one row for any other slice with sample != 0, none for the rest. The host sets logits_rows to
   * the rows its buffer holds, which is that count; the model leaves it or sets the count it wrote.
   * When info.returns_logits_on_request, the same, except that a slice without all_logits has its
   * row only where batch.logits_wanted marks it (headway::sdk::logits_rows states the rule). */
  float* logits;
  uint32_t logits_rows;
  uint32_t vocab;
} hw_model_output;

typedef struct hw_model_table {
  uint32_t struct_size;
  /* config_dir: directory of the deployment file, for resolving relative paths in options. */
  int32_t (*create)(const hw_host_services* host, const hw_options* options, hw_str config_dir,
                    hw_model** out, hw_status* status);
  void (*destroy)(hw_model* model);
  int32_t (*get_info)(hw_model* model, hw_model_info* info, hw_status* status);
  /* Allocates the KV cache: block_count blocks of block_size tokens. Called once before forward. */
  int32_t (*init_kv)(hw_model* model, uint32_t block_count, uint32_t block_size, hw_status* status);
  /* Describes the KV memory for transports (optional). */
  int32_t (*kv_memory)(hw_model* model, hw_memory_desc* memory, hw_status* status);
  /* Runs one step. */
  int32_t (*forward)(hw_model* model, const hw_model_batch* batch, hw_model_output* output,
                     hw_status* status);
} hw_model_table;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HEADWAY_ABI_H */
