#include "torch_tensor.h"

namespace fp8attn_py {
namespace {

PyObject* g_dtypes[kNumTorchDtypes] = {};

PyObject* interned(char const* text) {
  PyObject* s = PyUnicode_InternFromString(text);  // immortal for the interpreter's life
  return s;
}

bool read_tuple(PyObject* tuple, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (out[i] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

}  // namespace

void register_dtypes(PyObject* const* dtypes) {
  for (int i = 0; i < kNumTorchDtypes; ++i) {
    Py_XINCREF(dtypes[i]);
    g_dtypes[i] = dtypes[i];
  }
}

fp8attn::DataType data_type_of(int torch_dtype) {
  switch (torch_dtype) {
    case kTorchE4M3: return fp8attn::DataType::kE4M3;
    case kTorchE5M2: return fp8attn::DataType::kE5M2;
    case kTorchBF16: return fp8attn::DataType::kBF16;
    case kTorchF16: return fp8attn::DataType::kF16;
    case kTorchI8: return fp8attn::DataType::kI8;
    default: return fp8attn::DataType::kF32;
  }
}

bool read_tensor(char const* name, PyObject* object, TensorView* view) {
  static PyObject* const s_data_ptr = interned("data_ptr");
  static PyObject* const s_shape = interned("shape");
  static PyObject* const s_stride = interned("stride");
  static PyObject* const s_get_device = interned("get_device");
  static PyObject* const s_dtype = interned("dtype");

  *view = TensorView{};
  if (object == Py_None) return true;
  view->present = true;
  PyObject* shape = PyObject_GetAttr(object, s_shape);
  if (!shape) {
    // Not a tensor (no shape): say what was expected instead of the AttributeError.
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: expected a torch.Tensor, got %s", name, Py_TYPE(object)->tp_name);
    return false;
  }
  if (!PyTuple_Check(shape)) {
    Py_DECREF(shape);
    PyErr_Format(PyExc_TypeError, "%s: its shape is not a tuple", name);
    return false;
  }
  Py_ssize_t const ndim = PyTuple_GET_SIZE(shape);
  if (ndim > 4) {
    Py_DECREF(shape);
    PyErr_Format(PyExc_ValueError, "%s: expected at most 4 dimensions, got %zd", name, ndim);
    return false;
  }
  view->ndim = static_cast<int>(ndim);
  bool ok = read_tuple(shape, view->shape, view->ndim);
  Py_DECREF(shape);
  if (!ok) return false;

  PyObject* stride = PyObject_CallMethodNoArgs(object, s_stride);
  if (!stride) return false;
  ok = PyTuple_Check(stride) && PyTuple_GET_SIZE(stride) == ndim && read_tuple(stride, view->stride, view->ndim);
  Py_DECREF(stride);
  if (!ok) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: stride() is not a tuple of its rank", name);
    return false;
  }

  PyObject* data = PyObject_CallMethodNoArgs(object, s_data_ptr);
  if (!data) return false;
  view->data = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(data));
  Py_DECREF(data);
  if (PyErr_Occurred()) return false;

  PyObject* device = PyObject_CallMethodNoArgs(object, s_get_device);
  if (!device) return false;
  view->device = static_cast<int>(PyLong_AsLong(device));
  Py_DECREF(device);
  if (PyErr_Occurred()) return false;

  PyObject* dtype = PyObject_GetAttr(object, s_dtype);
  if (!dtype) return false;
  view->dtype = -1;
  for (int i = 0; i < kNumTorchDtypes; ++i) {
    if (dtype == g_dtypes[i]) view->dtype = i;
  }
  Py_DECREF(dtype);
  return true;
}

}  // namespace fp8attn_py
