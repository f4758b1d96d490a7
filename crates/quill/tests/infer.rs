//! `quill::infer`'s checkpoint-free parts: pictures prepared as MNIST's (inverted when light,
//! resized), the batch forms agreeing with one another, bad pictures refused by name, and an
//! `Evaluation`'s scores against counts made here.

use quill::infer::{Evaluation, ImageClassifier};
use quill::{DType, NDArray};

#[test]
fn prepare_inverts_light_pictures_and_resizes() {
    // 28 x 28 dark-on-light: inverted, pixel for pixel.
    let v: Vec<f32> = (0..784)
        .map(|i| if i % 29 == 0 { 0.0 } else { 1.0 })
        .collect();
    let a = ImageClassifier::prepare(&v, 28, 28).unwrap();
    assert_eq!(a.shape(), &[1, 1, 28, 28]);
    let got = a.to_vec::<f32>().unwrap();
    for (g, x) in got.iter().zip(&v) {
        assert_eq!(*g, 1.0 - x);
    }
    // Light-on-dark stays; a 56 x 84 picture becomes 28 x 28 with its mean kept roughly.
    let big: Vec<f32> = (0..56 * 84).map(|i| ((i / 84) % 2) as f32).collect();
    let b = ImageClassifier::prepare(&big, 56, 84)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let mean = b.iter().sum::<f32>() / 784.0;
    assert!((mean - 0.5).abs() < 0.05, "{mean}");
}

#[test]
fn batch_forms_agree() {
    let pixels: Vec<u8> = (0..2 * 30 * 40).map(|i| ((i * 37) % 256) as u8).collect();
    let u8s = NDArray::from_vec(pixels.clone(), &[2, 30, 40]).unwrap();
    let a = ImageClassifier::prepare_batch(&u8s).unwrap();
    assert_eq!(a.shape(), &[2, 1, 28, 28]);
    let floats = u8s.astype(DType::F64).unwrap().div_scalar(255.0).unwrap();
    let floats = floats.reshape(&[2, 1, 30, 40]).unwrap();
    let b = ImageClassifier::prepare_batch(&floats).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    // One picture (h, w) is picture 0 of the batch; a permuted view reads as its values.
    let first = u8s.slice(&quill::s![0]).unwrap();
    let one = ImageClassifier::prepare_batch(&first).unwrap();
    assert_eq!(
        one.to_vec::<f32>().unwrap(),
        a.to_vec::<f32>().unwrap()[..784]
    );
    let t = u8s.permute(&[0, 2, 1]).unwrap();
    let direct: Vec<f32> = {
        let c = t.compact().unwrap().to_vec::<u8>().unwrap();
        let v: Vec<f32> = c[..1200].iter().map(|&x| x as f32 / 255.0).collect();
        ImageClassifier::prepare(&v, 40, 30)
            .unwrap()
            .to_vec()
            .unwrap()
    };
    let via = ImageClassifier::prepare_batch(&t)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(via[..784], direct[..]);
}

#[test]
fn bad_pictures_are_refused_by_name() {
    let msg = |r: quill::Result<NDArray>| r.unwrap_err().to_string();
    assert!(msg(ImageClassifier::prepare(&[0.5; 10], 3, 4)).contains("needs 12 pixels"));
    assert!(msg(ImageClassifier::prepare(&[], 0, 0)).contains("at least one"));
    assert!(msg(ImageClassifier::prepare(&[1.5; 4], 2, 2)).contains("[0, 1]"));
    assert!(msg(ImageClassifier::prepare(&[f32::NAN; 4], 2, 2)).contains("[0, 1]"));
    let r5 = NDArray::zeros(&[1, 1, 1, 2, 2], DType::U8).unwrap();
    assert!(msg(ImageClassifier::prepare_batch(&r5)).contains("(n, 1, h, w)"));
    let b = NDArray::zeros(&[2, 2], DType::Bool).unwrap();
    assert!(msg(ImageClassifier::prepare_batch(&b)).contains("bool"));
    let e = ImageClassifier::read_images("/no/such/picture.png").unwrap_err();
    assert!(e.to_string().contains("/no/such/picture.png"), "{e}");
}

#[test]
fn evaluation_scores_match_counts() {
    let probabilities = vec![
        vec![0.7, 0.2, 0.1],
        vec![0.1, 0.8, 0.1],
        vec![0.05, 0.9, 0.05],
        vec![0.3, 0.3, 0.4],
        vec![0.6, 0.3, 0.1],
    ];
    let labels = vec![0, 1, 0, 2, 2];
    let mut confusion = vec![vec![0; 3]; 3];
    for (p, &y) in probabilities.iter().zip(&labels) {
        let best = (0..3).fold(0, |b, k| if p[k] > p[b] { k } else { b });
        confusion[y][best] += 1;
    }
    let e = Evaluation {
        probabilities,
        labels,
        confusion,
    };
    assert_eq!(e.correct(), 3);
    assert!((e.accuracy() - 0.6).abs() < 1e-12);
    assert_eq!(e.per_class(), vec![0.5, 1.0, 0.5]);
    // Wrong: sample 2 (as 1, 0.9) and sample 4 (as 0, 0.6), most confident first.
    assert_eq!(e.most_confident_mistakes(5), vec![(2, 1, 0.9), (4, 0, 0.6)]);
    assert_eq!(e.most_confident_mistakes(1).len(), 1);
}
