//! `quill.Tensor`: needle's Tensor (an array in the autograd graph) over quill's. Every op is
//! quill's differentiable op; `backward` is quill's engine. Tensors hold `Rc` graph nodes, so
//! a Tensor stays on the Python thread that made it (`unsendable`).

use crate::convert::{dtype_of, from_numpy_like, index_of, np_name, scalar_of, to_numpy, Q};
use crate::ndarray::{PyDevice, PyNDArray};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use quill::tensor::{no_grad, Tensor};
use quill::{BinaryOp, DType, Device, NDArray, Scalar, UnaryOp};

#[pyclass(name = "Tensor", module = "quill", unsendable, subclass)]
#[derive(Clone)]
pub struct PyTensor {
    pub inner: Tensor,
    /// For a tensor handed out as `leaf.grad`: that leaf, so that `backward` on it can
    /// recompute it differentiably (`second_order`).
    grad_of: Option<Tensor>,
}

fn wrap(t: Tensor) -> PyTensor {
    PyTensor {
        inner: t,
        grad_of: None,
    }
}

impl PyTensor {
    /// The Python object for a Rust tensor.
    pub fn wrap(t: Tensor) -> PyTensor {
        wrap(t)
    }
}

enum Other {
    T(Tensor),
    S(Scalar),
}

fn other(x: &Bound<'_, PyAny>) -> PyResult<Other> {
    if let Ok(t) = x.extract::<PyRef<PyTensor>>() {
        return Ok(Other::T(t.inner.clone()));
    }
    if let Some(s) = scalar_of(x) {
        return Ok(Other::S(s));
    }
    if let Ok(a) = x.extract::<PyRef<PyNDArray>>() {
        return Ok(Other::T(Tensor::new(a.inner.clone())));
    }
    Ok(Other::T(Tensor::new(from_numpy_like(x, None)?)))
}

fn bin(a: &Tensor, op: BinaryOp, o: &Bound<'_, PyAny>, reversed: bool) -> PyResult<PyTensor> {
    let t = match other(o)? {
        Other::S(s) => a.binary_scalar(op, s, reversed),
        Other::T(b) if reversed => b.binary(op, a),
        Other::T(b) => a.binary(op, &b),
    };
    Ok(wrap(t.q()?))
}

/// needle's `axes` argument: None (all), an int, or a tuple of ints.
fn axes(a: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<isize>>> {
    match a {
        None => Ok(None),
        Some(x) if x.is_none() => Ok(None),
        Some(x) => match x.extract::<isize>() {
            Ok(i) => Ok(Some(vec![i])),
            Err(_) => x.extract::<Vec<isize>>().map(Some),
        },
    }
}

fn shape_of(x: &Bound<'_, PyAny>) -> PyResult<Vec<isize>> {
    match x.extract::<isize>() {
        Ok(i) => Ok(vec![i]),
        Err(_) => x.extract(),
    }
}

fn to_usize(v: &[isize]) -> PyResult<Vec<usize>> {
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| PyValueError::new_err("negative dimension")))
        .collect()
}

#[quill_py_guard::guard("Tensor")]
#[pymethods]
impl PyTensor {
    /// `Tensor(data, device=None, dtype=None, requires_grad=True)` as needle: data is an
    /// NDArray (its dtype kept), a Tensor (its data copied), or anything `numpy.asarray`
    /// takes, with the dtype NumPy gives it (a float64 array or a list of Python floats is
    /// float64, as in needle's NumPy-backed homeworks; Python integers that require grad are
    /// float64 too). `dtype` converts.
    #[new]
    #[pyo3(signature = (data, device = None, dtype = None, requires_grad = true))]
    fn new(
        data: &Bound<'_, PyAny>,
        device: Option<PyRef<PyDevice>>,
        dtype: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<Self> {
        let dtype = dtype.map(dtype_of).transpose()?;
        let a: NDArray = if let Ok(t) = data.extract::<PyRef<PyTensor>>() {
            t.inner.array().deep_copy().q()?
        } else if let Ok(a) = data.extract::<PyRef<PyNDArray>>() {
            a.inner.clone()
        } else {
            // needle's dtype rule (see the package docs): the data keeps the dtype NumPy gives
            // it, as in needle's NumPy-backed homeworks, where `Tensor([[4.0]])` is float64.
            // Python integers that must carry a gradient are stored as float64: quill's
            // autograd is floating-point (as PyTorch's), and needle's `Tensor([6])` is
            // differentiated (`requires_grad=False` keeps NumPy's int64).
            let np = data.py().import("numpy")?;
            let mut arr = np.call_method1("asarray", (data,))?;
            let is_numpy = data.is_instance(&np.getattr("ndarray")?)?
                || data.is_instance(&np.getattr("generic")?)?;
            let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
            if dtype.is_none() && requires_grad && !is_numpy && matches!(kind.as_str(), "i" | "u") {
                arr = arr.call_method1("astype", ("float64",))?;
            }
            from_numpy_like(&arr, dtype)?
        };
        let a = match dtype {
            Some(d) if d != a.dtype() => a.astype(d).q()?,
            _ => a,
        };
        let a = a.to_device(device.map_or(a.device(), |d| d.device)).q()?;
        let rg = requires_grad && (a.dtype().is_float() || a.dtype().is_complex());
        Ok(wrap(Tensor::from_array(a, rg).q()?))
    }

    /// The dimensions as a tuple of ints (`()` for a 0-d tensor).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }
    /// The number of axes, `len(shape)`.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.ndim()
    }
    /// The number of elements, the product of `shape` (1 for a 0-d tensor).
    #[getter]
    fn size(&self) -> usize {
        self.inner.numel()
    }
    /// The element type as NumPy's name: 'float32', 'float64', 'int64', ...
    #[getter]
    fn dtype(&self) -> &'static str {
        np_name(self.inner.dtype())
    }
    /// The BackendDevice the tensor's data lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.inner.device(),
        }
    }
    /// Whether backward() computes a gradient for this tensor: set on float leaves made with
    /// `requires_grad=True`, and on op results that depend on such a tensor while gradients are
    /// recorded.
    #[getter]
    fn requires_grad(&self) -> bool {
        self.inner.requires_grad()
    }
    /// True for a tensor made by no op (needle's `is_leaf()`, a method).
    fn is_leaf(&self) -> bool {
        self.inner.is_leaf()
    }
    /// The gradient the last backward() left in this tensor, or None: a Tensor of this shape that
    /// can itself be differentiated (`x.grad.backward()` gives second derivatives). Assigning
    /// replaces it (None clears it); a tensor of another shape is a ValueError.
    #[getter]
    fn grad(&self) -> Option<PyTensor> {
        self.inner.grad().map(|g| PyTensor {
            inner: g,
            grad_of: Some(self.inner.clone()),
        })
    }
    /// Replaces the gradient (None clears it), as optimizers and gradient clipping do; a tensor of
    /// another shape is a ValueError.
    #[setter]
    fn set_grad(&self, g: Option<PyRef<PyTensor>>) -> PyResult<()> {
        crate::second_order::forget(&self.inner);
        self.inner.set_grad(g.map(|g| g.inner.clone())).q()
    }
    /// A tensor outside the graph that shares this one's data (needle's `.data`).
    #[getter]
    fn data(&self) -> PyTensor {
        wrap(self.inner.detach())
    }
    /// Overwrites this tensor's values in place (needle optimizers: `p.data = ...`); every
    /// holder of this tensor sees the new values.
    #[setter]
    fn set_data(&self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let _g = no_grad();
        match other(v)? {
            Other::T(t) => self.inner.array().assign(t.array()).q(),
            Other::S(s) => self.inner.array().assign_scalar(s).q(),
        }
    }
    /// A new leaf with `requires_grad=False` over the same data (no copy), cut from the graph, as
    /// PyTorch's `detach()`.
    fn detach(&self) -> PyTensor {
        wrap(self.inner.detach())
    }
    /// The tensors this one was made from (`[]` for a leaf): needle's `inputs`. A scalar
    /// operand (`x * 2.0`) is a parameter of the op, as in needle, not an input.
    #[getter]
    fn inputs(&self) -> Vec<PyTensor> {
        self.inner
            .inputs()
            .into_iter()
            .filter(|t| !t.is_scalar_operand())
            .map(wrap)
            .collect()
    }
    /// The identity of this tensor's graph node (equal for every Python object over it).
    #[getter]
    fn _node_id(&self) -> usize {
        self.inner.node_id()
    }
    /// The name of quill's op that made this tensor (`None` for a leaf).
    #[getter]
    fn _op_name(&self) -> Option<&'static str> {
        self.inner.grad_fn_name()
    }
    /// The Python op object of a tensor made by `make_from_op`, else `None`.
    #[getter]
    fn _py_op(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        crate::graph::py_op(&self.inner, py)
    }
    /// This node's backward alone, given the gradient of this tensor: one gradient (or `None`)
    /// per input, as a tuple (needle's `op.gradient_as_tuple(out_grad, node)`).
    fn _input_grads<'py>(
        &self,
        py: Python<'py>,
        out_grad: PyRef<'_, PyTensor>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let gs = self.inner.input_grads(&out_grad.inner).q()?;
        let ins = self.inner.inputs();
        let kept = gs
            .into_iter()
            .zip(&ins)
            .filter(|(_, x)| !x.is_scalar_operand())
            .map(|(g, _)| g.map(wrap))
            .collect::<Vec<_>>();
        PyTuple::new(py, kept)
    }
    /// The tensor's data as an NDArray (needle's `realize_cached_data`): the same buffer, no copy,
    /// no graph.
    fn realize_cached_data(&self) -> PyNDArray {
        PyNDArray::wrap(self.inner.array().clone())
    }
    /// The tensor's data as an NDArray over the same buffer, no copy (needle's `cached_data`).
    #[getter]
    fn cached_data(&self) -> PyResult<PyNDArray> {
        self.realize_cached_data()
    }
    /// A NumPy array with the tensor's values: always a C-order copy (bfloat16 comes out as
    /// float32), outside the graph.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy(py, self.inner.array())
    }
    /// DLPack export of the tensor's values (zero-copy, no graph), as torch's.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        crate::export::export_dlpack(py, self.inner.array(), max_version, dl_device, copy)
    }
    /// DLPack's `(device_type, device_id)` of the tensor's data: `(1, 0)` on the CPU, `(2, i)` on
    /// CUDA device i.
    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::export::dlpack_device(py, self.inner.array())
    }
    /// NumPy's conversion hook (`np.asarray(t)`): always a copy of the values, whatever `copy`
    /// says, cast to `dtype` when one is given.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = copy;
        let a = to_numpy(py, self.inner.array())?;
        match dtype {
            Some(d) if !d.is_none() => a.call_method1("astype", (d,)),
            _ => Ok(a),
        }
    }
    /// The one element as a Python float, whatever the dtype; a tensor of any other size is a
    /// ValueError.
    fn item(&self) -> PyResult<f64> {
        self.inner.item().q()
    }
    /// This tensor on `device`, differentiable (the gradient flows back to the source device); the
    /// same tensor when it is there already.
    fn to(&self, device: PyRef<PyDevice>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.to_device(device.device).q()?))
    }
    /// A copy converted to `dtype` (a name or a NumPy dtype) with NumPy's casting, differentiable
    /// (the gradient comes back in the input's dtype); the same tensor when the dtype already
    /// matches.
    fn astype(&self, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.astype(dtype_of(dtype)?).q()?))
    }

    /// Gradients of this tensor (seeded with `out_grad`, or ones) into every leaf's `.grad`,
    /// as needle's `backward`: each pass sets `.grad` (`accumulate=True` adds to it, as
    /// PyTorch), the graph stays usable (`retain_graph=False` frees what it saved), and a
    /// leaf's `.grad` can be differentiated again: `x.grad.backward()` gives second
    /// derivatives, recomputing the gradient with its graph while the output it came from is
    /// alive. `create_graph=True` records the pass itself instead (PyTorch's flag: it ties
    /// each leaf to its gradient's graph until `.grad` is reset).
    #[pyo3(signature = (out_grad = None, *, retain_graph = true, create_graph = false, accumulate = false))]
    fn backward(
        &self,
        out_grad: Option<PyRef<PyTensor>>,
        retain_graph: bool,
        create_graph: bool,
        accumulate: bool,
    ) -> PyResult<()> {
        let opts = quill::tensor::BackwardOptions {
            retain_graph,
            create_graph,
            overwrite_grad: !accumulate,
        };
        // A `.grad` handed out without its graph: recompute it with the graph first.
        let root = match &self.grad_of {
            Some(leaf) if !self.inner.requires_grad() => {
                crate::second_order::differentiable_grad(leaf).q()?
            }
            _ => self.inner.clone(),
        };
        let ones;
        let g = match &out_grad {
            Some(g) => Some(&g.inner),
            None if root.numel() == 1 => None,
            None => {
                ones = root.ones_like().q()?;
                Some(&ones)
            }
        };
        root.backward_opts(g, opts).q()?;
        if retain_graph && !create_graph {
            crate::second_order::record(&root, g);
        }
        Ok(())
    }

    /// a + b elementwise, differentiable, with NumPy broadcasting and type promotion. b is a
    /// Tensor, a Python number (weak, NEP 50; a parameter of the op, not an input), or an NDArray
    /// or anything `numpy.asarray` takes (a constant).
    fn __add__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Add, o, false)
    }
    /// b + a with this tensor on the right; rules as `a + b`.
    fn __radd__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Add, o, true)
    }
    /// `a - b`. Between two tensors it is needle's graph, `a + (-b)` (`EWiseAdd` over
    /// `Negate`: needle code that walks `op` / `inputs` sees those nodes), bit for bit the
    /// difference; with a number it is one node (needle's `AddScalar(-b)`).
    fn __sub__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        match other(o)? {
            Other::S(_) => bin(&self.inner, BinaryOp::Sub, o, false),
            Other::T(b) => Ok(wrap(self.inner.binary(BinaryOp::Add, &b.neg().q()?).q()?)),
        }
    }
    /// b - a with this tensor on the right; rules as `a - b` (with a tensor or array b, needle's
    /// graph `b + (-a)`).
    fn __rsub__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        match other(o)? {
            Other::S(_) => bin(&self.inner, BinaryOp::Sub, o, true),
            Other::T(b) => Ok(wrap(b.binary(BinaryOp::Add, &self.inner.neg().q()?).q()?)),
        }
    }
    /// a * b elementwise, differentiable, with NumPy broadcasting and type promotion; Python
    /// numbers are weak (NEP 50), arrays are constants.
    fn __mul__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Mul, o, false)
    }
    /// b * a with this tensor on the right; rules as `a * b`.
    fn __rmul__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Mul, o, true)
    }
    /// a / b, true division elementwise, differentiable, with NumPy broadcasting and type promotion
    /// (integer operands give float64); Python numbers are weak (NEP 50).
    fn __truediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Div, o, false)
    }
    /// b / a with this tensor on the right; rules as `a / b`.
    fn __rtruediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Div, o, true)
    }
    /// a ** b elementwise, differentiable in both operands, with NumPy broadcasting and type
    /// promotion; Python numbers are weak (NEP 50). `pow` with a modulus is a TypeError.
    fn __pow__(&self, o: &Bound<'_, PyAny>, modulo: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        if !modulo.is_none() {
            return Err(PyTypeError::new_err(
                "pow() with a modulus is not supported",
            ));
        }
        bin(&self.inner, BinaryOp::Pow, o, false)
    }
    /// b ** a with this tensor as the exponent; rules as `a ** b`.
    fn __rpow__(&self, o: &Bound<'_, PyAny>, _modulo: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        bin(&self.inner, BinaryOp::Pow, o, true)
    }
    /// a @ b with b a Tensor: NumPy's matmul (1-D operands as vectors, batch dims broadcast),
    /// differentiable.
    fn __matmul__(&self, o: PyRef<PyTensor>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.matmul(&o.inner).q()?))
    }
    /// The matrix product `a @ b` (b a Tensor), as `__matmul__`.
    fn matmul(&self, o: PyRef<PyTensor>) -> PyResult<PyTensor> {
        self.__matmul__(o)
    }
    /// The complex conjugate (the tensor itself when real); gradients follow PyTorch's
    /// convention for complex values (dL/dx + i dL/dy).
    fn conj(&self) -> PyResult<PyTensor> {
        self.inner.conj().q().map(wrap)
    }
    /// The real part, a real tensor; differentiable.
    #[getter]
    fn real(&self) -> PyResult<PyTensor> {
        self.inner.real().q().map(wrap)
    }
    /// The imaginary part, a real tensor (zeros for a real one); differentiable.
    #[getter]
    fn imag(&self) -> PyResult<PyTensor> {
        self.inner.imag().q().map(wrap)
    }
    /// The inverse of each square matrix (..., n, n), differentiable; a singular matrix is a
    /// ValueError naming its batch index.
    fn inv(&self) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.inv().q()?))
    }
    /// The determinant of each square matrix, shape (...), differentiable.
    fn det(&self) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.det().q()?))
    }
    /// (sign, log |det|) of each square matrix; log |det| is differentiable.
    fn slogdet(&self) -> PyResult<(PyTensor, PyTensor)> {
        let (s, l) = self.inner.slogdet().q()?;
        Ok((wrap(s), wrap(l)))
    }
    /// x with a x = b for each square matrix a of this tensor; b is a vector (n,) or a stack
    /// (..., n, k) whose batch dims broadcast; differentiable in both.
    fn solve(&self, b: PyRef<PyTensor>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.solve(&b.inner).q()?))
    }
    /// The Cholesky factor of each symmetric positive-definite matrix (lower; upper with
    /// `upper=True`), differentiable.
    #[pyo3(signature = (upper = false))]
    fn cholesky(&self, upper: bool) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.cholesky(upper).q()?))
    }
    /// (eigenvalues ascending, eigenvectors as columns) of each symmetric matrix (lower
    /// triangle read), both differentiable where the eigenvalues are distinct.
    fn eigh(&self) -> PyResult<(PyTensor, PyTensor)> {
        let (w, v) = self.inner.eigh().q()?;
        Ok((wrap(w), wrap(v)))
    }
    /// The thin SVD (U, S, Vh) of each matrix, all differentiable where the singular values are
    /// distinct and non-zero.
    fn svd(&self) -> PyResult<(PyTensor, PyTensor, PyTensor)> {
        let (u, s, vh) = self.inner.svd().q()?;
        Ok((wrap(u), wrap(s), wrap(vh)))
    }
    /// The reduced QR (Q, R) of each matrix, differentiable for tall or square matrices.
    fn qr(&self) -> PyResult<(PyTensor, PyTensor)> {
        let (q, r) = self.inner.qr().q()?;
        Ok((wrap(q), wrap(r)))
    }
    /// -a elementwise, differentiable; a bool tensor raises TypeError.
    fn __neg__(&self) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.neg().q()?))
    }
    /// a[idx] with NumPy basic indexing (ints, slices of any step, None, ...): a differentiable
    /// view, whose gradient scatters back into zeros of a's shape. Masks and integer-array indices
    /// are an IndexError.
    fn __getitem__(&self, idx: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.slice(&index_of(idx)?).q()?))
    }

    /// Elementwise `op` by its name in quill's vocabulary (`exp`, `relu`, `tanh`, ...). The
    /// package installs one method per op of the table on top of this (`t.exp()`).
    fn unary(&self, op: &str) -> PyResult<PyTensor> {
        let u = UnaryOp::from_name(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown unary op '{op}'")))?;
        Ok(wrap(self.inner.unary(u).q()?))
    }
    /// Binary `op` by name (`add`, `maximum`, `atan2`, ...), the other operand a Tensor, an
    /// array or a Python number; `reversed` computes `op(other, self)`.
    #[pyo3(signature = (op, other, reversed = false))]
    fn binary(&self, op: &str, other: &Bound<'_, PyAny>, reversed: bool) -> PyResult<PyTensor> {
        let b = BinaryOp::from_name(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown binary op '{op}'")))?;
        bin(&self.inner, b, other, reversed)
    }

    /// Sum over `axes` (an int, a tuple, or None for all; `keepdims` keeps them as size 1),
    /// differentiable; integer and bool tensors sum to int64 (uint64 for unsigned).
    #[pyo3(signature = (axes = None, keepdims = false))]
    fn sum(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        let a = self::axes(axes)?;
        Ok(wrap(self.inner.sum(a.as_deref(), keepdims).q()?))
    }
    /// Mean over `axes` (an int, a tuple, or None for all; `keepdims` keeps them as size 1),
    /// differentiable: the sum over the count (integer tensors give float64; the mean of nothing is
    /// NaN).
    #[pyo3(signature = (axes = None, keepdims = false))]
    fn mean(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        let a = self::axes(axes)?;
        Ok(wrap(self.inner.mean(a.as_deref(), keepdims).q()?))
    }
    /// Maximum over `axes` (an int, a tuple, or None for all; `keepdims` keeps them as size 1),
    /// differentiable: tied maxima share the gradient equally. An empty reduction is a ValueError.
    #[pyo3(signature = (axes = None, keepdims = false))]
    fn max(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        let a = self::axes(axes)?;
        Ok(wrap(self.inner.max(a.as_deref(), keepdims).q()?))
    }
    /// `log(sum(exp(x)))` over `axes` (an int, a tuple, or None for all; `keepdims` keeps them as
    /// size 1), computed stably by shifting by the maximum; differentiable.
    #[pyo3(signature = (axes = None, keepdims = false))]
    fn logsumexp(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> PyResult<PyTensor> {
        let a = self::axes(axes)?;
        Ok(wrap(self.inner.logsumexp(a.as_deref(), keepdims).q()?))
    }
    /// `x - logsumexp(x)` along `axis`: log-probabilities of the same shape, differentiable.
    fn log_softmax(&self, axis: isize) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.log_softmax(axis).q()?))
    }
    /// `exp(x)` normalised to sum to 1 along `axis`, shifted by the maximum so large logits do not
    /// overflow; same shape, differentiable.
    fn softmax(&self, axis: isize) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.softmax(axis).q()?))
    }
    /// The tensor with a new shape (an int or a tuple; one dim may be -1), differentiable: a view
    /// of the data when the strides allow one, else a copy. A shape of another size is a
    /// ValueError.
    fn reshape(&self, shape: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.reshape(&shape_of(shape)?).q()?))
    }
    /// The tensor broadcast to `shape` (an int or a tuple) by NumPy's rules: a stride-0 view,
    /// differentiable (the gradient is summed back); the same tensor when the shape already
    /// matches.
    fn broadcast_to(&self, shape: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        Ok(wrap(
            self.inner.broadcast_to(&to_usize(&shape_of(shape)?)?).q()?,
        ))
    }
    /// needle's `transpose`: swaps the last two axes, or the two given.
    #[pyo3(signature = (axes = None))]
    fn transpose(&self, axes: Option<(isize, isize)>) -> PyResult<PyTensor> {
        let (a, b) = axes.unwrap_or((-2, -1));
        Ok(wrap(self.inner.transpose(a, b).q()?))
    }
    /// The axes reordered (`axes` a list or tuple; `axes[i]` is the source of result axis i): a
    /// differentiable view.
    fn permute(&self, axes: Vec<isize>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.permute(&axes).q()?))
    }
    /// The order reversed along `axes` (a list or tuple of ints): a differentiable view with
    /// negative strides.
    fn flip(&self, axes: Vec<isize>) -> PyResult<PyTensor> {
        Ok(wrap(self.inner.flip(&axes).q()?))
    }
    /// Splits along `axis` into its slices, each without that axis (needle's `split`).
    fn split<'py>(&self, py: Python<'py>, axis: isize) -> PyResult<Bound<'py, PyList>> {
        let nd = self.inner.ndim() as isize;
        let ax = if axis < 0 { axis + nd } else { axis };
        if !(0..nd).contains(&ax) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "split: axis {axis} out of range for rank {nd}"
            )));
        }
        let n = self.inner.shape()[ax as usize];
        let parts = self.inner.split(&vec![1; n], ax).q()?;
        let out: Vec<PyTensor> = parts
            .into_iter()
            .map(|p| p.squeeze(&[ax]).map(wrap))
            .collect::<quill::Result<_>>()
            .q()?;
        PyList::new(py, out)
    }
    /// repr(t): the values and the device, as `quill.Tensor(..., device=cpu())`.
    fn __repr__(&self) -> String {
        let dev = match self.inner.device() {
            Device::Cpu => "cpu()".to_string(),
            d => d.to_string(),
        };
        format!("quill.Tensor({}, device={dev})", self.inner.array())
    }
    /// str(t): the values, without the device.
    fn __str__(&self) -> String {
        self.inner.array().to_string()
    }
    /// len(t): the length of the first axis; a 0-d tensor raises TypeError.
    fn __len__(&self) -> PyResult<usize> {
        self.inner
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }
}

/// `stack(tensors, axis)`: differentiable.
#[quill_py_guard::guard]
#[pyfunction]
pub fn stack(tensors: Vec<PyRef<PyTensor>>, axis: isize) -> PyResult<PyTensor> {
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.inner.clone()).collect();
    let refs: Vec<&Tensor> = ts.iter().collect();
    Ok(wrap(Tensor::stack(&refs, axis).q()?))
}

/// 2-D convolution on NCHW tensors with an OIHW weight (quill's im2col + matmul).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, w, bias = None, stride = 1, padding = 0))]
pub fn conv2d(
    x: PyRef<PyTensor>,
    w: PyRef<PyTensor>,
    bias: Option<PyRef<PyTensor>>,
    stride: usize,
    padding: usize,
) -> PyResult<PyTensor> {
    let d = common_dtype(&[&x.inner, &w.inner])?;
    let b = bias.as_ref().map(|b| to_dtype(&b.inner, d)).transpose()?;
    Ok(wrap(
        quill::nn::Conv2d::functional(
            &to_dtype(&x.inner, d)?,
            &to_dtype(&w.inner, d)?,
            b.as_ref(),
            stride,
            padding,
            1usize,
        )
        .q()?,
    ))
}

/// The dtype NumPy promotion gives `ts` (a float64 input with float32 weights computes in
/// float64, as needle's NumPy-backed ops do).
pub(crate) fn common_dtype(ts: &[&Tensor]) -> PyResult<DType> {
    Ok(ts
        .iter()
        .map(|t| t.dtype())
        .reduce(quill::promote_types)
        .unwrap_or(DType::F32))
}

/// `t` in dtype `d` (itself when it has it already); the cast is differentiable.
pub(crate) fn to_dtype(t: &Tensor, d: DType) -> PyResult<Tensor> {
    if t.dtype() == d {
        Ok(t.clone())
    } else {
        t.astype(d).q()
    }
}

/// needle's `ops.conv`: `a` (N, H, W, Cin) with weight `b` (kh, kw, Cin, Cout), zero
/// `padding` on H and W, `stride`; returns (N, Ho, Wo, Cout). quill's `Tensor::conv`.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (a, b, stride = 1, padding = 0))]
pub fn conv(
    a: PyRef<PyTensor>,
    b: PyRef<PyTensor>,
    stride: usize,
    padding: usize,
) -> PyResult<PyTensor> {
    let d = common_dtype(&[&a.inner, &b.inner])?;
    let (a, b) = (to_dtype(&a.inner, d)?, to_dtype(&b.inner, d)?);
    Ok(wrap(a.conv(&b, stride, padding).q()?))
}

/// needle's `ops.dilate`: `dilation` zeros after every element along each of `axes` (an int
/// or a tuple).
#[quill_py_guard::guard]
#[pyfunction]
pub fn dilate(a: PyRef<PyTensor>, axes: &Bound<'_, PyAny>, dilation: usize) -> PyResult<PyTensor> {
    let ax = self::axes(Some(axes))?.unwrap_or_default();
    Ok(wrap(a.inner.dilate(&ax, dilation).q()?))
}

/// needle's `ops.undilate`: every `(dilation + 1)`-th element along each of `axes`.
#[quill_py_guard::guard]
#[pyfunction]
pub fn undilate(
    a: PyRef<PyTensor>,
    axes: &Bound<'_, PyAny>,
    dilation: usize,
) -> PyResult<PyTensor> {
    let ax = self::axes(Some(axes))?.unwrap_or_default();
    Ok(wrap(a.inner.undilate(&ax, dilation).q()?))
}

/// Zero padding, one `(before, after)` pair per axis (`np.pad` with zeros); differentiable.
#[quill_py_guard::guard]
#[pyfunction]
pub fn pad(a: PyRef<PyTensor>, axes: Vec<(usize, usize)>) -> PyResult<PyTensor> {
    Ok(wrap(a.inner.pad(&axes).q()?))
}

/// Cross-entropy of logits (N, C) against integer labels (N): quill's fused loss, the mean.
#[quill_py_guard::guard]
#[pyfunction]
pub fn cross_entropy(logits: PyRef<PyTensor>, labels: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let y = match labels.extract::<PyRef<PyTensor>>() {
        Ok(t) => t.inner.array().clone(),
        Err(_) => match labels.extract::<PyRef<PyNDArray>>() {
            Ok(a) => a.inner.clone(),
            Err(_) => from_numpy_like(labels, Some(DType::I64))?,
        },
    };
    let y = if y.dtype().is_int() {
        y
    } else {
        y.astype(DType::I64).q()?
    };
    // Labels from NumPy start on the CPU; they follow the logits, as a DataLoader's would.
    let y = y.to_device(logits.inner.device()).q()?;
    Ok(wrap(
        quill::nn::functional::cross_entropy(
            &logits.inner,
            &y,
            0.0,
            quill::nn::functional::Reduction::Mean,
        )
        .q()?,
    ))
}
