//! The PNG of the training curves: loss (left) and accuracy (right) per epoch, train in blue and
//! test in red. Drawn with plotters' bitmap backend and no text, so no system fonts are needed
//! (the CSV beside it carries the numbers and the legend is in the README).

use plotters::prelude::*;
use std::path::Path;

/// One epoch's figures.
#[derive(Clone, Debug)]
pub struct Row {
    pub epoch: usize,
    pub train_loss: f64,
    pub train_acc: f64,
    pub test_loss: f64,
    pub test_acc: f64,
    pub seconds: f64,
    pub samples_per_s: f64,
}

fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    series: [(&[f64], RGBColor); 2],
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<_>| x.to_string();
    area.fill(&WHITE).map_err(e)?;
    let (w, h) = area.dim_in_pixel();
    let (m, w, h) = (20i32, w as i32, h as i32);
    let all: Vec<f64> = series.iter().flat_map(|(s, _)| s.iter().copied()).collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let n = series
        .iter()
        .map(|(s, _)| s.len())
        .max()
        .unwrap_or(0)
        .max(2);
    let to_px = |i: usize, v: f64| {
        let x = m + ((w - 2 * m) as f64 * i as f64 / (n - 1) as f64) as i32;
        let y = h - m - ((h - 2 * m) as f64 * (v - lo) / span) as i32;
        (x, y)
    };
    area.draw(&Rectangle::new(
        [(m, m), (w - m, h - m)],
        BLACK.stroke_width(1),
    ))
    .map_err(e)?;
    for (s, color) in series {
        let pts: Vec<(i32, i32)> = s.iter().enumerate().map(|(i, &v)| to_px(i, v)).collect();
        area.draw(&PathElement::new(pts.clone(), color.stroke_width(2)))
            .map_err(e)?;
        for p in pts {
            area.draw(&Circle::new(p, 3, color.filled())).map_err(e)?;
        }
    }
    Ok(())
}

/// Writes the two panels to `path`.
pub fn write(path: &Path, rows: &[Row]) -> Result<(), String> {
    let root = BitMapBackend::new(path, (960, 400)).into_drawing_area();
    let panels = root.split_evenly((1, 2));
    let col = |f: fn(&Row) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    let (tl, vl) = (col(|r| r.train_loss), col(|r| r.test_loss));
    let (ta, va) = (col(|r| r.train_acc), col(|r| r.test_acc));
    panel(&panels[0], [(&tl, BLUE), (&vl, RED)])?;
    panel(&panels[1], [(&ta, BLUE), (&va, RED)])?;
    root.present()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes the metrics as CSV (the whole history each time, so a resumed run continues it).
pub fn write_csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let mut s =
        String::from("epoch,train_loss,train_acc,test_loss,test_acc,seconds,samples_per_s\n");
    for r in rows {
        s.push_str(&format!(
            "{},{:.6},{:.6},{:.6},{:.6},{:.3},{:.1}\n",
            r.epoch, r.train_loss, r.train_acc, r.test_loss, r.test_acc, r.seconds, r.samples_per_s
        ));
    }
    std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads back what `write_csv` wrote (for `--resume`).
pub fn read_csv(path: &Path) -> Vec<Row> {
    let Ok(s) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    s.lines()
        .skip(1)
        .filter_map(|l| {
            let v: Vec<f64> = l.split(',').filter_map(|x| x.parse().ok()).collect();
            (v.len() == 7).then(|| Row {
                epoch: v[0] as usize,
                train_loss: v[1],
                train_acc: v[2],
                test_loss: v[3],
                test_acc: v[4],
                seconds: v[5],
                samples_per_s: v[6],
            })
        })
        .collect()
}
