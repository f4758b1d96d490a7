"""Lesson 4 in Python: needle-style training on MNIST through `import quill as ndl`: needle's
MNISTDataset and DataLoader, an nn.Sequential MLP, SoftmaxLoss and optim.Adam (the layers,
loss and optimizer step run in Rust).

    python crates/quill-py/examples/mnist_mlp.py [STEPS]   (default one epoch, ~97 %)
"""
import sys

import numpy as np
import quill as ndl
import quill.nn as nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 469
np.random.seed(0)
train = ndl.data.MNISTDataset("data/mnist/train-images-idx3-ubyte.gz",
                              "data/mnist/train-labels-idx1-ubyte.gz")
test = ndl.data.MNISTDataset("data/mnist/t10k-images-idx3-ubyte.gz",
                             "data/mnist/t10k-labels-idx1-ubyte.gz")
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
loss_fn, opt = nn.SoftmaxLoss(), ndl.optim.Adam(model.parameters(), lr=1e-3)

model.train()
for step, (x, y) in enumerate(ndl.data.DataLoader(train, batch_size=128, shuffle=True)):
    if step == steps:
        break
    opt.reset_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step:4}  loss {loss.numpy().item():.4f}")

model.eval()
x, y = test[:10000]
pred = model(ndl.Tensor(x)).numpy().argmax(axis=1)
accuracy = (pred == y).mean()
print(f"test accuracy after {steps} steps: {100 * accuracy:.2f} %")
