"""Lesson 3 in Python: a needle TensorOp of your own joins quill's Rust graph. `compute` runs on
NDArrays, `gradient` is written in Tensor ops, so the op backpropagates beside the built-in ops
and can be differentiated again (second order), as PyTorch's autograd.Function.

    python crates/quill-py/examples/custom_op.py
"""
import numpy as np
import quill as ndl
from quill.autograd import TensorOp


class Softplus(TensorOp):
    """log(1 + exp(x)); its derivative is sigmoid(x) = 1 / (1 + exp(-x))."""

    def compute(self, a):
        return (a.exp() + 1.0).log()

    def gradient(self, out_grad, node):
        (x,) = node.inputs
        return out_grad / (ndl.ops.exp(-x) + 1.0)


def softplus(x):
    return Softplus()(x)


x = ndl.Tensor(np.array([-1.0, 0.0, 2.0]))           # float64, as needle keeps it
y = (softplus(x) * x).sum()
y.backward()
sig = 1 / (1 + np.exp(-x.numpy()))
want = np.log1p(np.exp(x.numpy())) + x.numpy() * sig
np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
print("d/dx sum(x softplus(x)):", x.grad.numpy())

# Second order: differentiate the gradient of sum(softplus(x)) (= sum(sigmoid(x))).
# create_graph=True (PyTorch's flag) records the backward pass, the user op's gradient
# included, so any function of x.grad can be differentiated again.
x = ndl.Tensor(np.array([-1.0, 0.0, 2.0]))
softplus(x).sum().backward(create_graph=True)
g = x.grad
x.grad = None
g.sum().backward()
np.testing.assert_allclose(x.grad.numpy(), sig * (1 - sig), rtol=1e-12)
print("second derivative:", x.grad.numpy())
print("custom op: ok")
