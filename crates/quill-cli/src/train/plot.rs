//! The training curves: loss (left) and accuracy (right) per epoch, train in blue and test in
//! red, with axes, ticks, axis titles, a legend and a title, written as PNG and as SVG. Text is
//! drawn with DejaVu Sans compiled into the binary (assets/, licence in assets/FONT-LICENSE),
//! so the PNG has its labels on a machine with no fonts installed.

use super::metrics::Row;
use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::Path;
use std::sync::OnceLock;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans-subset.ttf");
pub(crate) const FAMILY: &str = "sans-serif";

pub(crate) fn font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded plot font is not a valid font file".to_string())
        })
        .clone()
}

/// What the panels say: the figure's title and the y-axis titles.
pub struct Labels<'a> {
    pub title: &'a str,
    /// The legend's name for the held-out series ("test", or "valid" where that split is
    /// what the epochs are scored on).
    pub held_out: &'a str,
    pub loss: &'a str,
    pub accuracy: &'a str,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// `lo..hi` padded by 5 % (a flat series gets a unit band), so points never sit on the frame.
fn padded(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return 0.0..1.0;
    }
    let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 };
    lo - pad..hi + pad
}

type Series<'a> = [(&'a str, Vec<(i32, f64)>, RGBColor); 2];

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    y_desc: &str,
    series: Series<'_>,
    legend_at: SeriesLabelPosition,
) -> Result<(), String> {
    let xs = series.iter().flat_map(|(_, s, _)| s.iter().map(|p| p.0));
    let (x0, x1) = xs.fold((i32::MAX, i32::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (x0, x1) = if x0 > x1 {
        (0, 1)
    } else if x0 == x1 {
        (x0 - 1, x1 + 1)
    } else {
        (x0, x1)
    };
    let y = padded(series.iter().flat_map(|(_, s, _)| s.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x0..x1, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(y_desc)
        .x_labels(((x1 - x0) as usize + 1).min(12))
        .y_labels(8)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (name, pts, color) in series {
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(legend_at)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    rows: &[Row],
    labels: &Labels,
) -> Result<(), String> {
    font()?;
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(labels.title, (FAMILY, 24)).map_err(err)?;
    let panels = body.split_evenly((1, 2));
    let col = |f: fn(&Row) -> f64| -> Vec<(i32, f64)> {
        rows.iter().map(|r| (r.epoch as i32, f(r))).collect()
    };
    panel(
        &panels[0],
        "loss",
        labels.loss,
        [
            ("train", col(|r| r.train_loss), BLUE),
            ("test", col(|r| r.test_loss), RED),
        ],
        SeriesLabelPosition::UpperRight,
    )?;
    panel(
        &panels[1],
        "accuracy",
        labels.accuracy,
        [
            ("train", col(|r| 100.0 * r.train_acc), BLUE),
            (labels.held_out, col(|r| 100.0 * r.test_acc), RED),
        ],
        SeriesLabelPosition::LowerRight,
    )?;
    root.present().map_err(err)
}

/// Writes the curves to `png` and, beside it, the same figure as `.svg`, each atomically (drawn
/// in memory, then written with `quill::io::write_atomic`), so a crash never leaves a torn plot.
pub fn write(png: &Path, rows: &[Row], labels: &Labels) -> Result<(), String> {
    let at = |p: &Path, e: String| format!("{}: {e}", p.display());
    let mut pixels = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    draw(
        BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(),
        rows,
        labels,
    )
    .map_err(|e| at(png, e))?;
    quill::io::write_atomic(png, |w| {
        PngEncoder::new(w)
            .write_image(&pixels, SIZE.0, SIZE.1, ColorType::Rgb8)
            .map_err(std::io::Error::other)
    })
    .map_err(|e| e.to_string())?;
    let svg = png.with_extension("svg");
    let mut text = String::new();
    draw(
        SVGBackend::with_string(&mut text, SIZE).into_drawing_area(),
        rows,
        labels,
    )
    .map_err(|e| at(&svg, e))?;
    quill::io::write_atomic(&svg, |w| w.write_all(text.as_bytes())).map_err(|e| e.to_string())
}

const SIZE: (u32, u32) = (1100, 460);

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        (1..=4)
            .map(|e| Row {
                epoch: e,
                train_loss: 1.0 / e as f64,
                train_acc: 0.8 + 0.04 * e as f64,
                test_loss: 1.2 / e as f64,
                test_acc: 0.78 + 0.04 * e as f64,
                seconds: 1.0,
                samples_per_s: 1.0,
            })
            .collect()
    }

    const LABELS: Labels = Labels {
        title: "quill test figure",
        held_out: "test",
        loss: "cross-entropy loss",
        accuracy: "accuracy (%)",
    };

    #[test]
    fn the_svg_carries_title_axes_ticks_and_legend() {
        let dir = std::env::temp_dir().join(format!("quill-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("curves.png");
        write(&png, &rows(), &LABELS).unwrap();
        assert!(png.exists());
        // plotters writes each text element's content on its own line.
        let svg = std::fs::read_to_string(dir.join("curves.svg"))
            .unwrap()
            .replace("\n", "");
        for text in [
            "quill test figure",
            "cross-entropy loss",
            "accuracy (%)",
            "epoch",
            ">train<",
            ">test<",
            ">loss<",
        ] {
            assert!(svg.contains(text), "{text} missing from the SVG");
        }
        // Epoch ticks 1..4 and a y tick inside the accuracy range.
        for tick in [">1<", ">2<", ">3<", ">4<"] {
            assert!(svg.contains(tick), "tick {tick} missing");
        }
        assert!(
            svg.contains(">90"),
            "no tick near 90 % on the accuracy axis"
        );
    }

    #[test]
    fn the_png_has_text_pixels_from_the_embedded_font() {
        let mut buf = vec![255u8; (SIZE.0 * SIZE.1 * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area();
            draw(root, &rows(), &LABELS).unwrap();
        }
        // The title band above the panels holds nothing but the title's glyphs.
        let dark = |y: u32| {
            (0..SIZE.0)
                .filter(|&x| buf[((y * SIZE.0 + x) * 3) as usize] < 128)
                .count()
        };
        let title_ink: usize = (0..28).map(dark).sum();
        assert!(title_ink > 200, "the title drew {title_ink} dark pixels");
        // Without text the figure would have no ink left of the left panel's y axis but the
        // tick labels and the axis title.
        let left_ink = (60..400u32)
            .flat_map(|y| (0..40u32).map(move |x| (x, y)))
            .filter(|&(x, y)| buf[((y * SIZE.0 + x) * 3) as usize] < 128)
            .count();
        assert!(
            left_ink > 100,
            "the y-axis labels drew {left_ink} dark pixels"
        );
    }
}
