// kolo._kolo's elastic part (elastic_bindings.cc): kolo::elastic::State
// and Run for kolo.torch.elastic.
#ifndef KOLO_PYTHON_ELASTIC_BINDINGS_H_
#define KOLO_PYTHON_ELASTIC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace kolo::python {

// Adds ElasticState and is_elastic_worker to `m`, which must already hold
// the exceptions InternalError and MembershipChanged.
void BindElastic(pybind11::module_& m);

}  // namespace kolo::python

#endif  // KOLO_PYTHON_ELASTIC_BINDINGS_H_
