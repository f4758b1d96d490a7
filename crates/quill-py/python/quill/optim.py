"""needle's ``optim``: SGD and Adam over quill Tensors (updates are Tensor ops in Rust,
written into each parameter's buffer through ``.data``)."""


from ._native import check_arg as _check


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
        self.u = {}

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad.data + self.weight_decay * p.data
            if self.momentum:
                u = self.u.get(i)
                u = (1 - self.momentum) * g if u is None else self.momentum * u + (1 - self.momentum) * g
                self.u[i] = u.data
                g = u
            p.data = p.data - self.lr * g


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
        self.t = 0
        self.m, self.v = {}, {}

    def step(self):
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad.data + self.weight_decay * p.data
            m = self.m.get(i)
            v = self.v.get(i)
            m = (1 - b1) * g if m is None else b1 * m + (1 - b1) * g
            v = (1 - b2) * g * g if v is None else b2 * v + (1 - b2) * g * g
            self.m[i], self.v[i] = m.data, v.data
            mhat = m / (1 - b1 ** self.t)
            vhat = v / (1 - b2 ** self.t)
            p.data = p.data - self.lr * mhat / (vhat ** 0.5 + self.eps)
