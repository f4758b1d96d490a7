//! The model zoo's CIFAR model: needle's ResNet9 maps (N, 3, 32, 32) to (N, 10), has the
//! parameter count its layer list implies, and fits a tiny batch.

use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};

#[test]
fn resnet9_shapes_parameter_count_and_a_falling_loss() {
    let m = models::resnet9(0).unwrap();
    // conv (k*k*in*out + out bias) + batchnorm (2 * out) per ConvBN.
    let convbn = |i: usize, o: usize, k: usize| k * k * i * o + o + 2 * o;
    let want = convbn(3, 16, 7)
        + convbn(16, 32, 3)
        + 2 * convbn(32, 32, 3)
        + convbn(32, 64, 3)
        + convbn(64, 128, 3)
        + 2 * convbn(128, 128, 3)
        + (128 * 128 + 128)
        + (128 * 10 + 10);
    assert_eq!(models::parameter_count(&m), want);

    let x = Tensor::new(quill::NDArray::randn(&[4, 3, 32, 32], 1, DType::F32).unwrap());
    let y = NDArray::from_vec(vec![0i64, 3, 7, 9], &[4]).unwrap();
    let mut opt = Adam::new(m.parameters(), 0.01).unwrap();
    let mut losses = Vec::new();
    for _ in 0..8 {
        let logits = m.forward(&x).unwrap();
        assert_eq!(logits.shape(), &[4, 10]);
        let loss = cross_entropy(&logits, &y, 0.0, Reduction::Mean).unwrap();
        losses.push(loss.item().unwrap());
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    assert!(losses[7] < 0.5 * losses[0], "{losses:?}");
}
