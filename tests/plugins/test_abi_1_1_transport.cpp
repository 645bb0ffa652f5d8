// A KV transport as a plugin built against ABI 1.1 lays it out: the descriptor declares minor 1,
// and its table ends where 1.2's peer-link functions begin (struct_size 40 on x86-64). The host
// must load it and treat it as a transport without peer links. Transfers finish at once.
#include <cstddef>
#include <cstring>
#include <headway/plugin.hpp>

namespace {

class InstantTransport final : public headway::sdk::KvTransport {
 public:
  InstantTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}
  uint64_t start(const hw_kv_transfer&) override { return next_++; }
  headway::sdk::TransferProgress poll(uint64_t) override { return {HW_TRANSFER_DONE, 0.0}; }

 private:
  uint64_t next_ = 1;
};

using Adapter = headway::sdk::KvTransportAdapter<InstantTransport>;

// ABI 1.1's hw_kv_transport_table: the same first five members, nothing after them.
struct TableV1_1 {
  uint32_t struct_size;
  decltype(hw_kv_transport_table::create) create;
  decltype(hw_kv_transport_table::destroy) destroy;
  decltype(hw_kv_transport_table::start) start;
  decltype(hw_kv_transport_table::poll) poll;
};
static_assert(sizeof(TableV1_1) == offsetof(hw_kv_transport_table, peer_rendezvous));

const TableV1_1 kTable = {sizeof(TableV1_1), Adapter::table.create, Adapter::table.destroy,
                          Adapter::table.start, Adapter::table.poll};

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          1,
                                          HW_KIND_KV_TRANSPORT,
                                          headway::sdk::make_str("org.headway.test.abi_1_1"),
                                          headway::sdk::make_str("test_abi_1_1_transport"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("A transport built for ABI 1.1"),
                                          nullptr,
                                          0,
                                          &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
