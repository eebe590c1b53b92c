//! `--plot FILE.svg`: a benchmark's figures drawn as an SVG picture, ipcns
//! beside the kernel, one chart under the other. A benchmark that draws
//! returns its [`Chart`]s; `run` (main.rs) opens the file before the
//! benchmark runs ([`Output::open`]: a file that cannot be written is said
//! at once) and writes the picture after the table ([`svg`]). Drawn with
//! `plotters`' SVG backend alone (no fonts, no bitmaps: the text is SVG
//! `<text>`, which the viewer lays out).

use anyhow::{Context, anyhow};
use plotters::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The benchmarks that draw charts.
pub const DRAWN: [&str; 3] = ["msg", "semget", "semop"];

/// One chart: lines of points, one per side.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    /// Whether the x axis is logarithmic (key counts, id slots).
    pub x_log: bool,
    pub y_label: String,
    /// Whether the y axis is logarithmic (figures that differ a
    /// hundredfold, such as semget's first creation and the others).
    pub y_log: bool,
    pub series: Vec<Series>,
}

/// One side's line: `(x, y)` points in the order drawn.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Picture size per chart, in SVG pixels.
const WIDTH: u32 = 760;
const HEIGHT: u32 = 380;

/// The charts as one SVG document, one under the other.
pub fn svg(charts: &[Chart]) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let rows = charts.len().max(1);
        let root =
            SVGBackend::with_string(&mut out, (WIDTH, HEIGHT * rows as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("drawing: {e}"))?;
        for (area, chart) in root.split_evenly((rows, 1)).iter().zip(charts) {
            draw(area, chart).with_context(|| format!("drawing {:?}", chart.title))?;
        }
        root.present().map_err(|e| anyhow!("drawing: {e}"))?;
    }
    Ok(out)
}

/// The colours of the series, in order: ipcns, the kernel, others.
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let all = || c.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let y1 = all().fold(0.0f64, |m, p| m.max(p.1));
    if x0 > x1 {
        (x0, x1) = (1.0, 10.0);
    }
    if x0 == x1 {
        (x0, x1) = (x0 * 0.9, x1 * 1.1 + 1.0);
    }
    let y = 0.0..if y1 > 0.0 { y1 * 1.15 } else { 1.0 };
    let mut b = ChartBuilder::on(area);
    b.caption(&c.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64);
    let y_label = |v: &f64| if c.y_log { significant(*v) } else { short(*v) };
    macro_rules! plot {
        ($x:expr, $y:expr) => {{
            let mut ch = b.build_cartesian_2d($x, $y).map_err(|e| anyhow!("{e}"))?;
            ch.configure_mesh()
                .x_desc(&c.x_label)
                .y_desc(&c.y_label)
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&y_label)
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
            lines(&mut ch, c)
        }};
    }
    let xs = x0..x1;
    match (c.x_log, c.y_log) {
        (true, true) => plot!(xs.log_scale(), log_range(c).log_scale()),
        (true, false) => plot!(xs.log_scale(), y),
        (false, true) => plot!(xs, log_range(c).log_scale()),
        (false, false) => plot!(xs, y),
    }
}

/// A logarithmic y axis's range: from just below the power of ten under
/// the smallest positive figure (so that at least one labelled power of
/// ten is on the axis) to a quarter above the largest.
fn log_range(c: &Chart) -> std::ops::Range<f64> {
    let ys = || {
        c.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite() && *y > 0.0)
    };
    let (lo, hi) = ys().fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    if lo > hi {
        return 0.95..10.0;
    }
    // 0.95 of the power: plotters labels the powers at or above the
    // start, and 10^k computed from its logarithm may land just above it.
    let floor = 10f64.powf(lo.log10().floor()) * 0.95;
    floor..(hi * 1.25).max(floor * 10.0)
}

/// Each series as a line with a dot per point, and the legend.
fn lines<'a, DB, X, Y>(
    ch: &mut plotters::chart::ChartContext<'a, DB, Cartesian2d<X, Y>>,
    c: &Chart,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    for (i, s) in c.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        ch.draw_series(LineSeries::new(
            s.points.iter().copied(),
            colour.stroke_width(2),
        ))
        .map_err(|e| anyhow!("{e}"))?
        .label(s.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
        ch.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    // The legend in the first corner no point falls in (a box the size
    // of a two-line legend), upper left if none is free.
    let (xr, yr) = ch.plotting_area().get_pixel_range();
    let pts: Vec<(i32, i32)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| ch.backend_coord(p)))
        .collect();
    let (bw, bh) = (110, 60);
    let free = |left: bool, top: bool| {
        let x = if left {
            xr.start..xr.start + bw
        } else {
            xr.end - bw..xr.end
        };
        let y = if top {
            yr.start..yr.start + bh
        } else {
            yr.end - bh..yr.end
        };
        !pts.iter().any(|(px, py)| x.contains(px) && y.contains(py))
    };
    let corner = [
        (true, true, SeriesLabelPosition::UpperLeft),
        (false, true, SeriesLabelPosition::UpperRight),
        (false, false, SeriesLabelPosition::LowerRight),
        (true, false, SeriesLabelPosition::LowerLeft),
    ]
    .into_iter()
    .find(|(l, t, _)| free(*l, *t))
    .map_or(SeriesLabelPosition::UpperLeft, |(_, _, p)| p);
    ch.configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// An axis label: `31900`, `1.5k` is not used (the values are exact
/// counts), but a fraction keeps one decimal.
fn short(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A logarithmic axis's label: three significant digits at most, no
/// trailing zeros (`100`, `2000`, `0.5`): plotters computes the powers of
/// ten as `99.99999...` or `1000.0000001`.
fn significant(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return short(v);
    }
    let digits = 2 - v.log10().floor() as i32;
    let scale = 10f64.powi(digits);
    let r = (v * scale).round() / scale;
    if digits <= 0 {
        format!("{r:.0}")
    } else {
        let t = format!("{r:.prec$}", prec = digits as usize);
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The file `--plot` names, open from before the benchmark runs.
pub struct Output {
    path: PathBuf,
    file: std::fs::File,
    /// Whether this run made the file (removed again if the benchmark
    /// fails, where one that was there is left as it was).
    created: bool,
}

impl Output {
    /// Opens `path` for writing without changing it yet.
    pub fn open(path: &Path) -> anyhow::Result<Output> {
        let created = !path.exists();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| cannot_write(path, &e))?;
        Ok(Output {
            path: path.to_path_buf(),
            file,
            created,
        })
    }

    /// Replaces the file's contents with `svg`.
    pub fn write(mut self, svg: &str) -> anyhow::Result<()> {
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all(svg.as_bytes()))
            .and_then(|()| self.file.flush())
            .map_err(|e| cannot_write(&self.path, &e))
    }

    /// The benchmark failed: a file this run made is removed.
    pub fn abandon(self) {
        if self.created {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `bench: cannot write FILE: REASON` (the reason without Rust's
/// `(os error N)`, as `ipcns` says it).
fn cannot_write(path: &Path, e: &std::io::Error) -> anyhow::Error {
    let reason = e.to_string();
    let reason = match reason.find(" (os error ") {
        Some(i) => &reason[..i],
        None => &reason,
    };
    anyhow!("bench: cannot write {}: {reason}", path.display())
}

#[cfg(test)]
mod tests {
    use super::{Chart, Series, significant, svg};

    /// Whether `svg` has a `<text>` element saying `t` (plotters writes
    /// the text on a line of its own).
    fn says(svg: &str, t: &str) -> bool {
        svg.contains(&format!(">\n{t}\n</text>"))
    }

    fn chart(x_log: bool) -> Chart {
        Chart {
            title: "semget lookup".into(),
            x_label: "keys".into(),
            x_log,
            y_label: "ns per call".into(),
            y_log: false,
            series: vec![
                Series {
                    name: "ipcns".into(),
                    points: vec![(1.0, 20.0), (100.0, 22.0), (31900.0, 25.0)],
                },
                Series {
                    name: "kernel".into(),
                    points: vec![(1.0, 300.0), (100.0, 320.0), (31900.0, 900.0)],
                },
            ],
        }
    }

    #[test]
    fn two_charts_make_one_svg_with_every_series_named() {
        let s = svg(&[chart(true), chart(false)]).unwrap();
        assert!(s.starts_with("<svg "), "{s}");
        assert!(s.trim_end().ends_with("</svg>"), "{s}");
        assert_eq!(s.matches(">\nsemget lookup\n</text>").count(), 2, "{s}");
        assert!(says(&s, "ipcns") && says(&s, "kernel"), "{s}");
        assert!(says(&s, "keys") && says(&s, "ns per call"), "{s}");
        assert!(s.contains("<polyline"), "{s}");
    }

    #[test]
    fn a_logarithmic_y_axis_labels_its_powers_of_ten_plainly() {
        let mut c = chart(true);
        c.y_log = true;
        c.series[1].points[0].1 = 43000.0;
        let s = svg(&[c]).unwrap();
        assert!(says(&s, "ipcns") && says(&s, "kernel"), "{s}");
        assert!(says(&s, "semget lookup"), "{s}");
        for t in ["10", "100", "1000", "10000"] {
            assert!(says(&s, t), "no label {t} in {s}");
        }
        assert!(!s.contains("99.9") && !s.contains("000.0"), "{s}");
        // Points within a decade still get a labelled power of ten.
        let mut narrow = chart(false);
        narrow.y_log = true;
        narrow.series[0].points = vec![(1.0, 150.0), (2.0, 900.0)];
        narrow.series[1].points.clear();
        assert!(says(&svg(&[narrow]).unwrap(), "100"));
    }

    #[test]
    fn significant_digits() {
        assert_eq!(significant(99.99999999), "100");
        assert_eq!(significant(1000.0000001), "1000");
        assert_eq!(significant(43210.0), "43200");
        assert_eq!(significant(0.5), "0.5");
        assert_eq!(significant(2.5), "2.5");
        assert_eq!(significant(20.0), "20");
    }

    #[test]
    fn an_empty_series_or_one_point_draws_without_error() {
        let mut c = chart(true);
        c.series[1].points.clear();
        c.series[0].points.truncate(1);
        assert!(says(&svg(&[c]).unwrap(), "ipcns"));
        assert!(svg(&[]).unwrap().starts_with("<svg "));
    }
}
