"""needle's ``optim``: SGD and Adam as windows onto quill's Rust optimizers. A step is one call
into Rust that updates every parameter's buffer in place with the fused kernels; ``.grad`` is
read, never modified. needle's rules are options of the Rust optimizers (see
``crates/quill-py/src/optim.rs``): SGD keeps needle's ``u = m * u + (1 - m) * g`` from ``u = 0``,
Adam adds the L2 ``weight_decay`` to the gradient and corrects the bias, as needle's do.
``lr`` may be changed between steps (schedules)."""


from ._native import _adam, _sgd, check_arg as _check


class Optimizer:
    def __init__(self, params):
        self.params = list(params)

    def step(self):
        raise NotImplementedError

    def reset_grad(self):
        for p in self.params:
            p.grad = None

    zero_grad = reset_grad


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0, weight_decay=0.0):
        super().__init__(params)
        _check("non_negative", "SGD", "lr", lr)
        _check("probability", "SGD", "momentum", momentum)
        _check("non_negative", "SGD", "weight_decay", weight_decay)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        # needle's momentum: dampening = momentum, and the buffer starts at zero.
        self._rust = _sgd(self.params, lr, momentum=momentum, dampening=momentum,
                          weight_decay=weight_decay, zero_init=True)

    def step(self):
        self._rust.step(self.lr)


class Adam(Optimizer):
    def __init__(self, params, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
        super().__init__(params)
        _check("non_negative", "Adam", "lr", lr)
        _check("below_one", "Adam", "beta1", beta1)
        _check("below_one", "Adam", "beta2", beta2)
        _check("non_negative", "Adam", "eps", eps)
        _check("non_negative", "Adam", "weight_decay", weight_decay)
        self.lr, self.beta1, self.beta2 = lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay
        self._rust = _adam(self.params, lr, beta1=beta1, beta2=beta2, eps=eps,
                           weight_decay=weight_decay)

    @property
    def t(self):
        """The number of steps taken (needle's ``t``)."""
        return self._rust.steps

    def step(self):
        self._rust.step(self.lr)
