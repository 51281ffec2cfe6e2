// Covers where the holds stop: past the most exports' holds an owner takes, an export holds it as
// any reference (shared owner and claim), so the count never reaches the shared owner's hold; and
// an object put in place of an owner, at that owner's very address, is never taken for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "dlpack/context_access.hpp"
#include "holoscan/dlpack.hpp"
#include "stream/reference_holds.hpp"
#include "support/counting_producer.hpp"
#include "support/tensor_helpers.hpp"

namespace holoscan {
namespace {

using detail::ReferenceHolds;
using test::CountingProducer;
using test::import_or_die;
using test::TensorSpec;

TEST(ExportHoldsLimits, AnExportPastTheMostHoldsHoldsTheOwnerAsAnyReference) {
  CountingProducer producer;
  TensorSpec spec;
  spec.dtype = {kDLInt, 32, 1};
  Tensor tensor = import_or_die(producer, spec);
  StreamTrackedReference* owner = test::tracked(tensor).get();
  ASSERT_NE(owner, nullptr);
  // Exports' holds up to the limit, taken as exports take them.
  for (std::int64_t i = 0; i < ReferenceHolds::kMaxExportHolds; ++i) {
    ASSERT_TRUE(ReferenceHolds::try_hold(*owner));
  }
  EXPECT_FALSE(ReferenceHolds::try_hold(*owner));  // refused, nothing taken
  EXPECT_EQ(ReferenceHolds::export_holds(*owner), ReferenceHolds::kMaxExportHolds);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  // The Tensor's claim, the holds, and the export's own claim beside its shared_ptr.
  EXPECT_EQ(owner->handle_claims(), ReferenceHolds::kMaxExportHolds + 2);
  tensor = Tensor();
  for (std::int64_t i = 0; i < ReferenceHolds::kMaxExportHolds; ++i) {
    ReferenceHolds::drop_hold(*owner);
  }
  EXPECT_EQ(producer.deleter_calls(), 0);  // the export's shared_ptr keeps the owner
  EXPECT_EQ(owner->handle_claims(), 1);
  (*exported)->deleter(*exported);
  EXPECT_EQ(producer.deleter_calls(), 1);
}

// A reference of another class, which counts what it is asked.
class CountedReference final : public TensorMemoryReference {
 public:
  void retain_tensor_handle() noexcept override { ++retains; }
  void release_tensor_handle() noexcept override { ++releases; }
  int retains = 0;
  int releases = 0;
};

// Stands for an owner the library made that lives by its holds.
class HeldOwner final : public StreamTrackedReference {};

// Destroys a reference built in place without freeing its storage.
void destroy_in_place(TensorMemoryReference* reference) { reference->~TensorMemoryReference(); }

// What a HeldOwner's last hold would do; no hold is given back here.
void dispose_nothing(StreamTrackedReference* /*reference*/) noexcept {}

// Storage for an owner and for what a holder builds in its place, at the same address.
alignas(std::max_align_t) unsigned char room[std::max(sizeof(HeldOwner), sizeof(CountedReference))];

// A context over a host int32 scalar whose owner, marked as one that lives by its holds, was built
// in `room` and is gone again (its holder replaced it): the mark is left as it was.
std::shared_ptr<DLManagedTensorContext> context_whose_marked_owner_went() {
  static std::int32_t value = 7;
  auto context = std::make_shared<DLManagedTensorContext>();
  context->tensor.dl_tensor.data = &value;
  context->tensor.dl_tensor.device = DLDevice{kDLCPU, 0};
  context->tensor.dl_tensor.dtype = DLDataType{kDLInt, 32, 1};
  auto* owner = new (room) HeldOwner;
  ReferenceHolds::live_by_holds(*owner, &dispose_nothing);
  context->memory_reference = std::shared_ptr<TensorMemoryReference>(owner, &destroy_in_place);
  detail::ContextAccess::mark_memory_lives_by_holds(*context);
  EXPECT_NE(detail::ContextAccess::memory_held_by_holds(*context), nullptr);
  context->memory_reference = nullptr;  // the owner goes
  return context;
}

// A holder replaced an owner that lives by its holds, which was then destroyed, and put an object
// of its own at the owner's very address: an export must hold that object as any reference, never
// as an owner that lives by its holds (whose count it would write into the object).
TEST(ExportHoldsLimits, AnotherObjectAtTheOwnersAddressIsNotTakenForIt) {
  auto context = context_whose_marked_owner_went();
  auto* stranger = new (room) CountedReference;
  context->memory_reference = std::shared_ptr<TensorMemoryReference>(stranger, &destroy_in_place);
  ASSERT_EQ(static_cast<void*>(context->memory_reference.get()), static_cast<void*>(room));
  EXPECT_EQ(detail::ContextAccess::memory_held_by_holds(*context), nullptr);
  Tensor tensor(context);
  // Kept past the Tensor, whose context's drop would destroy it, so that its counts can be read.
  std::shared_ptr<TensorMemoryReference> kept = context->memory_reference;
  context.reset();
  EXPECT_EQ(stranger->retains, 1);
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(stranger->retains, 2);
  (*exported)->deleter(*exported);
  EXPECT_EQ(stranger->releases, 1);
  tensor = Tensor();
  EXPECT_EQ(stranger->releases, 2);
}

// As above, with an object of the owner's very class that its caller built (a public
// constructor): it lives by no holds, so an export holds it by its shared_ptr and a claim.
TEST(ExportHoldsLimits, AnOwnersClassBuiltByTheCallerAtItsAddressIsNotTakenForIt) {
  auto context = context_whose_marked_owner_went();
  auto* stranger = new (room) HeldOwner;  // the same class, living by no holds
  context->memory_reference = std::shared_ptr<TensorMemoryReference>(stranger, &destroy_in_place);
  EXPECT_EQ(detail::ContextAccess::memory_held_by_holds(*context), nullptr);
  Tensor tensor(context);
  // Kept past the Tensor, whose context's drop would destroy it, so that its counts can be read.
  std::shared_ptr<TensorMemoryReference> kept = context->memory_reference;
  context.reset();
  expected<DLManagedTensorVersioned*> exported = tensor.to_dlpack_versioned();
  ASSERT_TRUE(exported.has_value()) << exported.error().message;
  EXPECT_EQ(stranger->handle_claims(), 2);  // the Tensor's and the export's, no hold
  EXPECT_EQ(ReferenceHolds::export_holds(*stranger), 0);
  (*exported)->deleter(*exported);
  EXPECT_EQ(stranger->handle_claims(), 1);
  tensor = Tensor();
  EXPECT_EQ(stranger->unpaired_releases(), 0u);
}

}  // namespace
}  // namespace holoscan
